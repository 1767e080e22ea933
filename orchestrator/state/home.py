"""Where cvmjob keeps its own files: ``$CVMJOB_HOME`` (default ``~/.cvmjob``)."""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import uuid
from pathlib import Path

from ..contract.tags import owner
from ..errors import CvmjobError


class HomeError(CvmjobError):
    """$CVMJOB_HOME is not a folder cvmjob can use."""


def cvmjob_home() -> Path:
    """The folder, created if missing, readable by its owner only: it holds the store (every job's spec, train.env
    values included), the controllers' logs (the trainings' output) and the embedded emulator's keys."""
    home = Path(os.environ.get("CVMJOB_HOME") or Path.home() / ".cvmjob")
    try:
        home.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as exc:
        why = "it is a file" if home.is_file() else (exc.strerror or str(exc))
        hint = "set CVMJOB_HOME to a folder you can write"
        raise HomeError(f"{home} cannot hold cvmjob's files ({why}): {hint}") from exc
    return home


def state_db() -> Path:
    """The embedded store's SQLite file."""
    return cvmjob_home() / "state.db"


def store_url() -> str:
    """Where the state store is: ``$CVMJOB_DB`` when set (a ``postgresql://`` or ``sqlite://`` URL, or a path of a
    SQLite file), else the embedded file, ``$CVMJOB_HOME/state.db``."""
    return os.environ.get("CVMJOB_DB") or str(state_db())


IDENTITY = re.compile(r"[0-9a-f]{16}")


def controller_identity() -> str:
    """This home's controllers as one party: a random id kept in ``$CVMJOB_HOME/identity``, made at first use.
    ``$USER@hostname`` is not one (a second home, a CI runner, two hosts named alike share it): a lease holder
    or a job document names this id, and only a holder with it can be told dead by a look at its pid."""
    path = cvmjob_home() / "identity"
    if not path.exists():
        _create_once(path, secrets.token_hex(8) + "\n")
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise HomeError(f"{path} cannot be read ({exc}): delete it and a new identity is made") from exc
    if not IDENTITY.fullmatch(text.strip()):
        raise HomeError(f"{path} does not hold a controller identity (16 hex digits): delete it and a new one is made "
                        "(a controller of this home that is still running then counts as another's)")
    return text.strip()


def _create_once(path: Path, text: str) -> None:
    """``text`` at ``path`` unless another process put its own there first (a link never replaces a file)."""
    draft = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
    draft.write_text(text)
    try:
        with contextlib.suppress(FileExistsError):
            os.link(draft, path)
    finally:
        draft.unlink()


def controller_name() -> str:
    """This process as a lease holder: owner (for people to read), this home's identity and the pid (so that a dead
    holder of this home is recognised), and a nonce."""
    return f"{owner()}/{controller_identity()}/{os.getpid()}/{uuid.uuid4().hex[:8]}"


def died_here(holder: str) -> bool:
    """Whether ``holder`` (a controller_name()) was a process of this home that no longer exists: the pid is part
    of the name. False when it cannot tell: another home, though of the same ``$USER@hostname`` (its pids are not
    ours to look at: a CI runner, a container, a second machine of the same name), or a name of an older release."""
    parts = holder.rsplit("/", 3)
    if len(parts) != 4 or parts[0] != owner() or parts[1] != controller_identity() or not parts[2].isdigit():
        return False
    pid = int(parts[2])
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return pid == os.getpid()  # this process's pid, not its name: a controller that was here before (a restart)
