"""Start the emulator as a real server process on 127.0.0.1 for tests and benchmarks: with a key of its own
(made in its state directory, read back from there) or the one a caller hands it (in its environment), and
seeding from the temporary directory and this checkout unless the caller names its own ``--seed-root``."""

from __future__ import annotations

import signal
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from orchestrator.emulator.client import AdminClient
from orchestrator.emulator.config import DEFAULT_APPID, DEFAULT_SECRET_ID
from orchestrator.emulator.launcher import key_of, launch, proxy_free_environment

# Fast lifecycles for tests: seconds of emulated time.
TEST_TIMINGS = ("--boot-seconds", "0.5", "--terminate-seconds", "0.3", "--image-seconds", "0.5",
                "--driver-install-seconds", "0.3")
REPO = Path(__file__).resolve().parents[1]
# Where tests' example data lives: pytest's tmp_path and the checkout (jobs/quickstart/dataset).
SEED_ROOTS = ("--seed-root", tempfile.gettempdir(), "--seed-root", str(REPO))


@dataclass
class EmulatorProcess:
    endpoint: str
    state_dir: Path
    process: subprocess.Popen[bytes]
    log_path: Path
    secret_key: str
    secret_id: str = DEFAULT_SECRET_ID
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


def start_emulator(
    state_dir: Path, *extra: str, timeout: float = 30.0, secret_key: str | None = None
) -> EmulatorProcess:
    log_path = state_dir.parent / f"{state_dir.name}.log"
    roots = () if "--seed-root" in extra else SEED_ROOTS
    process, info = launch(state_dir, log_path, *TEST_TIMINGS, *roots, *extra, timeout=timeout, secret_key=secret_key)
    key = secret_key if secret_key is not None else key_of(info)
    return EmulatorProcess(info["endpoint"], state_dir, process, log_path, key)
