from __future__ import annotations

from pathlib import Path

from orchestrator.agent.manifest import scan, with_entry, would_be_dropped
from orchestrator.contract import CheckpointEntry, Manifest, checkpoint_name, checkpoint_step


def entry(step: int, attempt: int = 1) -> CheckpointEntry:
    return CheckpointEntry(name=checkpoint_name(step), step=step, files={"state.pt": 1}, size=1, attempt=attempt,
                           time=float(step))


def test_checkpoint_names_carry_the_step() -> None:
    assert checkpoint_name(42) == "step-00000042"
    assert checkpoint_step("step-00000042") == 42
    assert checkpoint_step("step-7.pt") == 7
    for name in (".step-00000042.123.tmp", "step-", "latest", "step-12.", "xstep-1"):
        assert checkpoint_step(name) is None


def test_scan_finds_complete_checkpoints_oldest_first_and_ignores_work_in_progress(tmp_path: Path) -> None:
    (tmp_path / "step-00000020").mkdir()
    (tmp_path / "step-00000020" / "state.pt").write_bytes(b"x")
    (tmp_path / "step-5.pt").write_bytes(b"y")
    (tmp_path / ".step-00000030.99.tmp").mkdir()
    (tmp_path / "notes.txt").write_text("")
    found = scan(tmp_path)
    assert [(c.name, c.step, c.is_file) for c in found] == [("step-5.pt", 5, True), ("step-00000020", 20, False)]
    assert found[0].files() == {"step-5.pt": tmp_path / "step-5.pt"}
    assert found[1].files() == {"state.pt": tmp_path / "step-00000020" / "state.pt"}
    assert scan(tmp_path / "missing") == []


def test_keep_last_drops_the_oldest_by_step() -> None:
    manifest = Manifest(checkpoints=[entry(30), entry(10), entry(20)])
    updated, dropped = with_entry(manifest, entry(40, attempt=2), keep_last=3)
    assert [c.step for c in updated.checkpoints] == [20, 30, 40]
    assert [c.step for c in dropped] == [10]
    assert updated.latest() == entry(40, attempt=2)


def test_the_same_name_is_replaced_not_duplicated() -> None:
    updated, dropped = with_entry(Manifest(checkpoints=[entry(10)]), entry(10, attempt=2), keep_last=3)
    assert updated.checkpoints == [entry(10, attempt=2)] and dropped == []


def test_an_upload_that_keep_last_would_drop_at_once_is_recognised() -> None:
    manifest = Manifest(checkpoints=[entry(20), entry(30)])
    assert would_be_dropped(manifest, 10, keep_last=2)
    assert not would_be_dropped(manifest, 25, keep_last=2)
    assert not would_be_dropped(manifest, 10, keep_last=3)
