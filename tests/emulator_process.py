"""Start the emulator as a real server process on 127.0.0.1 for tests and benchmarks."""

from __future__ import annotations

import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path

from orchestrator.emulator.client import AdminClient
from orchestrator.emulator.config import DEFAULT_APPID, DEFAULT_SECRET_ID, DEFAULT_SECRET_KEY
from orchestrator.emulator.launcher import launch, proxy_free_environment

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
    """The environment without proxies (the Tencent SDK routes 127.0.0.1 through HTTP_PROXY)."""
    return proxy_free_environment()


def start_emulator(state_dir: Path, *extra: str, timeout: float = 30.0) -> EmulatorProcess:
    log_path = state_dir.parent / f"{state_dir.name}.log"
    process, info = launch(state_dir, log_path, *TEST_TIMINGS, *extra, timeout=timeout)
    return EmulatorProcess(info["endpoint"], state_dir, process, log_path)
