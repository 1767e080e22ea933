"""The embedded local Tencent Cloud: started by cvmjob when no credentials are configured (or ``--emulator``).

It runs as its own process (a real server on 127.0.0.1, state under ``$CVMJOB_HOME/emulator``), so a controller
that dies (Ctrl-C twice, kill -9) leaves the cloud and its instances alive for ``cvmjob resume``. ``release``
stops it once no active job needs it.
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

from .emulator.client import AdminClient, AdminError
from .emulator.launcher import launch
from .errors import EXIT_CLOUD_ERROR, CvmjobError
from .home import cvmjob_home

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


def _dir() -> Path:
    return cvmjob_home() / "emulator"


def _alive(endpoint: str) -> bool:
    try:
        return bool(AdminClient(endpoint, timeout=2).health().get("ok"))
    except (AdminError, OSError, ValueError):  # refused, timed out, or not an emulator answering
        return False


def running() -> EmbeddedEmulator | None:
    info_path = _dir() / "server.json"
    if not info_path.exists():
        return None
    info = json.loads(info_path.read_text())
    if not _alive(info["endpoint"]):
        return None
    return EmbeddedEmulator(info["endpoint"], int(info["pid"]), Path(info["state_dir"]))


def ensure_running(timeout: float = 60.0) -> EmbeddedEmulator:
    """The embedded emulator, started if it is not running."""
    current = running()
    if current is not None:
        return current
    directory = _dir()
    state_dir, log = directory / "state", directory / "emulator.log"
    try:
        directory.mkdir(parents=True, exist_ok=True)
        process, ready = launch(state_dir, log, detached=True, timeout=timeout)
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
