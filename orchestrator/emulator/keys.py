"""The account's SecretKey: private to the emulator's user, because whoever holds it can run code as that user
(RunInstances' UserData runs as the emulator's process) and call the admin API.

Where it comes from, first found: ``--secret-key-file FILE`` (not readable by others), the environment variable
``TENCENTCLOUD_EMULATOR_SECRET_KEY``, else ``<state-dir>/secret_key``, made with a random key (0600) on the first
start and read again on every later one. Never from the command line: every user of the host can read a process's
arguments (``ps``), and only its owner its environment."""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
import string
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from .config import KEY_VARIABLE

KEY_FILE = "secret_key"  # in the state directory, when the key was not given
_ALPHABET = string.ascii_letters + string.digits
_KEY_LENGTH = 32  # a real SecretKey's length


class KeyProblem(ValueError):
    """A key that cannot be used, or a file that holds none; the message says what to do."""


@dataclass(frozen=True)
class Key:
    secret: str
    given: bool  # by the operator (file or environment), as opposed to made by the emulator
    file: Path | None  # where it can be read again (None: the environment)


def new_key() -> str:
    return "".join(secrets.choice(_ALPHABET) for _ in range(_KEY_LENGTH))


def check(secret: str, where: str) -> str:
    # It travels in an Authorization header and signs requests: printable, no spaces, long enough not to guess.
    if not secret or any(not c.isprintable() or c.isspace() for c in secret):
        raise KeyProblem(f"{where} holds no usable key: one line of printable characters without spaces")
    if len(secret) < 16:
        raise KeyProblem(f"{where} holds a key of {len(secret)} characters: use at least 16")
    return secret


def read_key_file(path: Path) -> str:
    """The key in ``path`` (one line); refused when others may read the file."""
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
        text = path.read_text()
    except OSError as exc:
        raise KeyProblem(f"cannot read the key file {path}: {exc.strerror or exc}") from exc
    if mode & 0o077:
        raise KeyProblem(f"the key file {path} can be read by other users (mode {mode:04o}): chmod 600 {path}")
    return check(text.strip(), f"the key file {path}")


def write_private(path: Path, text: str) -> None:
    """``path`` holding ``text``, readable by its owner only from its first byte (created 0600, then renamed)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with contextlib.suppress(FileNotFoundError):
        tmp.unlink()
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(text)
    tmp.replace(path)


def private_dir(path: Path) -> None:
    """``path`` made if missing, and readable by its owner only: it holds the key and every STS key issued."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    path.chmod(0o700)


def find_key(state_dir: Path, key_file: Path | None, environ: Mapping[str, str]) -> Key:
    if key_file is not None:
        return Key(read_key_file(key_file), True, key_file)
    if environ.get(KEY_VARIABLE):
        return Key(check(environ[KEY_VARIABLE], KEY_VARIABLE), True, None)
    own = state_dir / KEY_FILE
    if not own.exists():
        private_dir(state_dir)
        write_private(own, new_key() + "\n")
    return Key(read_key_file(own), False, own)
