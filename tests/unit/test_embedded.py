"""The embedded emulator's own process: started on demand, found again, stopped and reaped."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator import embedded


def test_started_found_again_then_stopped_and_reaped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CVMJOB_HOME", str(tmp_path))
    started = embedded.ensure_running()
    assert embedded.ensure_running() == embedded.running() == started  # one emulator, not one per command
    embedded.stop(started, timeout=20)
    # Not even a zombie: the process that started it reaps it (it used to wait out the timeout on its zombie).
    assert not Path(f"/proc/{started.pid}").exists()
    assert embedded.running() is None and not (tmp_path / "emulator" / "server.json").exists()
