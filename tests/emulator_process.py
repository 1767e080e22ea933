"""Start the emulator as a real server process on 127.0.0.1 for tests and benchmarks."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from orchestrator.emulator.client import AdminClient
from orchestrator.emulator.config import DEFAULT_APPID, DEFAULT_SECRET_ID, DEFAULT_SECRET_KEY

# Fast lifecycles for tests: seconds of emulated time.
TEST_TIMINGS = ("--boot-seconds", "0.5", "--terminate-seconds", "0.3", "--image-seconds", "0.5")


@dataclass
class EmulatorProcess:
    endpoint: str
    state_dir: Path
    process: subprocess.Popen[bytes]
    log_path: Path
    secret_id: str = DEFAULT_SECRET_ID
    secret_key: str = DEFAULT_SECRET_KEY
    appid: str = DEFAULT_APPID

    @property
    def port(self) -> int:
        return int(self.endpoint.rsplit(":", 1)[1])

    @property
    def admin(self) -> AdminClient:
        return AdminClient(self.endpoint, self.secret_key)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def clean_env() -> dict[str, str]:
    """The environment without proxies: the Tencent SDK routes 127.0.0.1 through HTTP_PROXY
    (shared/reference/client-recipes.md §2.6)."""
    env = dict(os.environ)
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY", "all_proxy"):
        env.pop(name, None)
    return env


def start_emulator(state_dir: Path, *extra: str, timeout: float = 30.0) -> EmulatorProcess:
    state_dir.mkdir(parents=True, exist_ok=True)
    ready = state_dir.parent / f"{state_dir.name}.ready.json"
    ready.unlink(missing_ok=True)
    log_path = state_dir.parent / f"{state_dir.name}.log"
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
        *TEST_TIMINGS,
        *extra,
    ]
    with log_path.open("ab") as log:  # the child keeps its own descriptor
        process = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, env=clean_env())
    deadline = time.monotonic() + timeout
    while not ready.exists():
        if process.poll() is not None:
            raise RuntimeError(f"emulator exited with {process.returncode}: {log_path.read_text()[-2000:]}")
        if time.monotonic() > deadline:
            process.kill()
            raise RuntimeError(f"emulator did not start in {timeout} s: {log_path.read_text()[-2000:]}")
        time.sleep(0.05)
    info = json.loads(ready.read_text())
    return EmulatorProcess(info["endpoint"], state_dir, process, log_path)
