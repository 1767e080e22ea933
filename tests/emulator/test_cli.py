"""`cvmjob emulator serve` (the same parser and server as `python -m orchestrator.emulator serve`): it serves until
SIGTERM, and a port it cannot have is one clear error."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

from orchestrator.emulator.client import AdminClient
from orchestrator.emulator.launcher import proxy_free_environment
from tests.waiting import wait_until


def cvmjob_emulator(*args: str) -> list[str]:
    return [sys.executable, "-m", "orchestrator.cli.main", "emulator", "serve", *args]


def test_serves_until_sigterm_and_refuses_a_port_it_cannot_have(tmp_path: Path) -> None:
    ready = tmp_path / "ready.json"
    server = subprocess.Popen(
        cvmjob_emulator("--port", "0", "--state-dir", str(tmp_path / "state"), "--ready-file", str(ready)),
        env=proxy_free_environment(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )
    try:
        info = wait_until("the ready file", lambda: ready.exists() and json.loads(ready.read_text()), 30)
        endpoint = info["endpoint"]
        assert AdminClient(endpoint, (tmp_path / "state" / "secret_key").read_text().strip()).health()["ok"]
        taken = subprocess.run(cvmjob_emulator("--port", endpoint.split(":")[1], "--state-dir", str(tmp_path / "b")),
                               capture_output=True, text=True, timeout=60, check=False)
        assert taken.returncode == 2
        assert taken.stderr == f"error: cannot listen on {endpoint}: Address already in use\n"
        server.send_signal(signal.SIGTERM)
        assert server.wait(timeout=30) == 0
    finally:
        server.kill()
        server.wait()
        assert server.stdout is not None
        server.stdout.close()


def test_a_port_out_of_range_is_a_usage_error(tmp_path: Path) -> None:
    done = subprocess.run(cvmjob_emulator("--port", "99999", "--state-dir", str(tmp_path)),
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2 and "argument --port: '99999' is not a port: 0-65535" in done.stderr
    assert "Traceback" not in done.stderr
