"""Start the emulator as a process of its own and wait until it listens (the embedded mode, tests, benchmarks)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from .config import KEY_VARIABLE
from .keys import private_dir

_PROXY_VARIABLES = ("http_proxy", "https_proxy", "all_proxy")


def proxy_free_environment() -> dict[str, str]:
    """This process's environment without proxies: the Tencent SDK would send 127.0.0.1 through HTTP_PROXY
    (shared/reference/client-recipes.md §2.6)."""
    return {k: v for k, v in os.environ.items() if k.lower() not in _PROXY_VARIABLES}


def launch(
    state_dir: Path, log_path: Path, *extra: str, detached: bool = False, timeout: float = 60.0,
    secret_key: str | None = None,
) -> tuple[subprocess.Popen[bytes], dict[str, Any]]:
    """``python -m orchestrator.emulator serve`` on a free port; returns the process and its ready document
    (endpoint, secret_id, secret_key_file, appid, state_dir). ``secret_key``: the key it runs with, handed over
    in its environment (never its arguments, which every user reads); None: it makes its own, read from
    ``secret_key_file``. ``detached`` puts it in a session of its own: it outlives its starter (the embedded
    emulator must survive a controller killed with -9)."""
    private_dir(state_dir)
    ready = state_dir.parent / f"{state_dir.name}.ready.json"
    ready.unlink(missing_ok=True)
    args = [
        sys.executable,
        "-m",
        "orchestrator.emulator",
        "serve",
        "--port",
        "0",
        "--state-dir",
        str(state_dir),
        "--ready-file",
        str(ready),
        *extra,
    ]
    env = {k: v for k, v in proxy_free_environment().items() if k != KEY_VARIABLE}
    if secret_key is not None:
        env[KEY_VARIABLE] = secret_key
    with log_path.open("ab") as log:  # the child keeps its own descriptor
        process = subprocess.Popen(
            args,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            start_new_session=detached,
        )
    deadline = time.monotonic() + timeout
    while not ready.exists():
        if process.poll() is not None:
            raise RuntimeError(f"the emulator exited with {process.returncode}: {_tail(log_path)}")
        if time.monotonic() > deadline:
            process.kill()
            process.wait()
            raise RuntimeError(f"the emulator did not start within {timeout:.0f} s: {_tail(log_path)}")
        time.sleep(0.05)
    info: dict[str, Any] = json.loads(ready.read_text())
    return process, info


def key_of(info: dict[str, Any]) -> str:
    """The key of an emulator ``launch`` started without one: from the file its ready document names."""
    return Path(info["secret_key_file"]).read_text().strip()


def _tail(path: Path) -> str:
    return path.read_text(errors="replace")[-2000:] if path.exists() else "(no log)"
