"""The embedded emulator's own process: started on demand, found again, stopped and reaped."""

from __future__ import annotations

import contextlib
import stat
from pathlib import Path

import pytest

from orchestrator.emulator.client import AdminClient, AdminError
from orchestrator.target import embedded


def test_started_found_again_then_stopped_and_reaped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CVMJOB_HOME", str(tmp_path))
    started = embedded.ensure_running()
    assert embedded.ensure_running() == embedded.running() == started  # one emulator, not one per command
    embedded.stop(started, timeout=20)
    # Not even a zombie: the process that started it reaps it (it used to wait out the timeout on its zombie).
    assert not Path(f"/proc/{started.pid}").exists()
    assert embedded.running() is None and not (tmp_path / "emulator" / "server.json").exists()


def test_its_key_is_its_own_private_and_off_every_command_line_and_it_seeds_only_under_home_or_cwd(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 27, item 5: the embedded emulator's key opens code execution as this user, so it is no public default:
    a random one in a 0600 file of a 0700 folder, which cvmjob reads; no process's argv holds it."""
    home, work, outside = tmp_path / "home", tmp_path / "work", tmp_path / "outside"
    for folder in (home / "data", work / "data", outside):
        folder.mkdir(parents=True)
        (folder / "f.txt").write_text("x")
    monkeypatch.setenv("CVMJOB_HOME", str(home / ".cvmjob"))
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(work)
    started = embedded.ensure_running()
    try:
        key_file = started.state_dir / "secret_key"
        assert stat.S_IMODE(started.state_dir.stat().st_mode) == 0o700
        assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
        assert started.secret_key == embedded.secret_key() == key_file.read_text().strip()
        assert started.secret_key != "cvmjobEmulatorSecretKey000000000"  # the public key every emulator took
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                with contextlib.suppress(OSError):
                    assert started.secret_key.encode() not in (entry / "cmdline").read_bytes(), entry
        admin = AdminClient(started.endpoint, started.secret_key)
        assert admin.seed("home-1250000000", "", home / "data")["files"] == 1
        assert admin.seed("work-1250000000", "", work / "data")["files"] == 1
        with pytest.raises(AdminError, match=f"may seed only from folders under {home}, {work}"):
            admin.seed("outside-1250000000", "", outside)
        with pytest.raises(AdminError) as refused:
            AdminClient(started.endpoint, "cvmjobEmulatorSecretKey000000000").health()
        assert refused.value.status == 403
    finally:
        embedded.stop(started, timeout=20)
