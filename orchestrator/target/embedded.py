"""The embedded local Tencent Cloud: started by cvmjob when no credentials are configured (or ``--emulator``).

It runs as its own process (a real server on 127.0.0.1, state under ``$CVMJOB_HOME/emulator``), so a controller
that dies (Ctrl-C twice, kill -9) leaves the cloud and its instances alive for ``cvmjob resume``. ``release``
stops it once no active job needs it.

Its SecretKey is its own, made at its first start in ``$CVMJOB_HOME/emulator/state/secret_key`` (0600, in a 0700
folder) and read from there by cvmjob: whoever holds it runs code as this user. It seeds (``cvmjob emulator seed``)
only from folders under the user's home directory or the directory of the command that started it.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from ..emulator.client import AdminClient, AdminError
from ..emulator.keys import KEY_FILE, KeyProblem, private_dir, read_key_file
from ..emulator.launcher import launch
from ..errors import EXIT_CLOUD_ERROR, CvmjobError
from ..extras import need
from ..state.home import cvmjob_home

# Emulators this process started, kept to be reaped by stop() (one started by an earlier command is not our child).
_children: dict[int, subprocess.Popen[bytes]] = {}


class EmulatorDidNotStart(CvmjobError):
    """The embedded emulator's process did not come up; the message names its log."""

    exit_code = EXIT_CLOUD_ERROR


@dataclass(frozen=True)
class EmbeddedEmulator:
    endpoint: str
    pid: int
    state_dir: Path

    @property
    def secret_key(self) -> str:
        return _key_in(self.state_dir)


def _dir() -> Path:
    return cvmjob_home() / "emulator"


def _key_in(state_dir: Path) -> str:
    try:
        return read_key_file(state_dir / KEY_FILE)
    except KeyProblem as exc:
        raise EmulatorDidNotStart(f"the local emulator's key: {exc}") from exc


def secret_key() -> str:
    """The embedded emulator's SecretKey (it made it at its first start)."""
    return _key_in(_dir() / "state")


def _probe(endpoint: str, state_dir: Path) -> Literal["ok", "other key", "gone"]:
    """"ok": our emulator answers there; "other key": an emulator that does not take our key (one of an earlier
    cvmjob, on the old public key, or the key file changed); "gone": nothing, or not an emulator."""
    key_file = state_dir / KEY_FILE
    try:
        key = read_key_file(key_file) if key_file.exists() else "no key file"  # still asked: it may say 403
        return "ok" if AdminClient(endpoint, key, timeout=2).health().get("ok") else "gone"
    except AdminError as exc:
        return "other key" if exc.status == 403 else "gone"
    except (KeyProblem, OSError, ValueError):  # a key file others may read, refused, timed out, not an emulator
        return "gone"


def _recorded() -> tuple[EmbeddedEmulator, Literal["ok", "other key", "gone"]] | None:
    info_path = _dir() / "server.json"
    if not info_path.exists():
        return None
    info = json.loads(info_path.read_text())
    found = EmbeddedEmulator(info["endpoint"], int(info["pid"]), Path(info["state_dir"]))
    return found, _probe(found.endpoint, found.state_dir)


def running() -> EmbeddedEmulator | None:
    recorded = _recorded()
    return recorded[0] if recorded is not None and recorded[1] == "ok" else None


def ensure_running(timeout: float = 60.0) -> EmbeddedEmulator:
    """The embedded emulator, started if it is not running."""
    recorded = _recorded()
    if recorded is not None and recorded[1] == "ok":
        return recorded[0]
    if recorded is not None and recorded[1] == "other key":  # a second one would share its state directory
        old = recorded[0]
        raise EmulatorDidNotStart(
            f"the local emulator at {old.endpoint} (pid {old.pid}) does not take the key in "
            f"{old.state_dir / KEY_FILE} (an earlier cvmjob started it, or the file changed): stop it "
            f"(kill {old.pid}) and run the command again"
        )
    need("emulator", "jwt", "cryptography")  # the server's side, in the process it starts
    directory = _dir()
    state_dir, log = directory / "state", directory / "emulator.log"
    # What `cvmjob emulator seed FOLDER` may name: under the user's home, or where this command runs (a checkout).
    roots = [arg for root in (Path.home(), Path.cwd()) for arg in ("--seed-root", str(root))]
    try:
        private_dir(directory)
        process, ready = launch(state_dir, log, *roots, detached=True, timeout=timeout)
    except (RuntimeError, OSError) as exc:
        raise EmulatorDidNotStart(f"the local emulator did not start: {exc} (its log: {log})") from exc
    _children[process.pid] = process
    endpoint = ready["endpoint"]
    info = {"endpoint": endpoint, "pid": process.pid, "state_dir": str(state_dir)}
    (directory / "server.json").write_text(json.dumps(info))
    return EmbeddedEmulator(endpoint, process.pid, state_dir)


def stop(emulator: EmbeddedEmulator, timeout: float = 30.0) -> None:
    try:
        os.kill(emulator.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    child = _children.pop(emulator.pid, None)
    if child is not None:
        # Reaped, not only gone: a zombie still answers kill(pid, 0), and `cvmjob run` waited out the timeout on it.
        with contextlib.suppress(subprocess.TimeoutExpired):
            child.wait(timeout)
    else:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                os.kill(emulator.pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.1)
    (_dir() / "server.json").unlink(missing_ok=True)
