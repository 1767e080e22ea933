"""trainkit across two real gloo processes under torchrun."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[3]

# Rank 1 alone receives the checkpoint request, in the middle of step 5; rank 0 must still save and stop there.
SCRIPT = """
import os, signal, sys
import torch, torch.distributed as dist
from orchestrator import trainkit

dist.init_process_group("gloo")
rank = dist.get_rank()
ckpt = trainkit.Checkpointer(every=3)
start, state = ckpt.restore({"w": torch.zeros(2)})
last = start - 1
for step in range(start, int(sys.argv[1])):
    state = {"w": state["w"] + 1}
    if rank == 1 and step == 5 and not ckpt.resume_from:
        os.kill(os.getpid(), signal.SIGUSR1)
    trainkit.report(step, float(step))
    if ckpt.should_save(step):
        ckpt.save(step, state)
    last = step
    if ckpt.stop_requested:
        break
print(f"rank={rank} start={start} last={last} stopped={ckpt.stop_requested} w={state['w'][0].item():.0f}", flush=True)
trainkit.finish()
"""


def torchrun(tmp_path: Path, steps: int, resume_from: str = "") -> str:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1",
           "CVMJOB_CHECKPOINT_DIR": str(tmp_path / "ckpt"), "CVMJOB_PROGRESS_FILE": str(tmp_path / "progress.json"),
           "CVMJOB_RESUME_FROM": resume_from}
    (tmp_path / "train.py").write_text(SCRIPT)
    done = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
                           "train.py", str(steps)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
                          check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_a_request_on_one_rank_makes_every_rank_save_and_stop_at_the_same_step(tmp_path: Path) -> None:
    out = torchrun(tmp_path, steps=20)
    assert "rank=0 start=0 last=5 stopped=True w=6" in out
    assert "rank=1 start=0 last=5 stopped=True w=6" in out
    assert sorted(p.name for p in (tmp_path / "ckpt").iterdir()) == ["step-00000002", "step-00000005"]
    progress = json.loads((tmp_path / "progress.json").read_text())
    assert (progress["step"], progress["stopped"]) == (5, True)

    resumed = torchrun(tmp_path, steps=8, resume_from=str(tmp_path / "ckpt" / "step-00000005"))
    assert "rank=0 start=6 last=7 stopped=False w=8" in resumed  # no step repeated, none skipped
    assert json.loads((tmp_path / "progress.json").read_text())["stopped"] is False


def test_after_an_in_place_restart_a_single_node_resumes_from_its_newest_checkpoint(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    from orchestrator import trainkit

    for step in (3, 5, 9):
        (tmp_path / f"step-{step:08d}").mkdir()
        torch.save({"step": torch.tensor(step)}, tmp_path / f"step-{step:08d}" / "state.pt")
    monkeypatch.setenv("CVMJOB_CHECKPOINT_DIR", str(tmp_path))
    monkeypatch.setenv("CVMJOB_RESUME_FROM", str(tmp_path / "step-00000003"))
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    assert trainkit.Checkpointer().restore({})[0] == 4  # the first start: what the agent restored
    monkeypatch.setenv("TORCHELASTIC_RESTART_COUNT", "1")
    start, state = trainkit.Checkpointer().restore({})
    assert (start, int(state["step"])) == (10, 9)
    monkeypatch.setenv("WORLD_SIZE", "4")  # two nodes: the other one has no such folder, so no guessing
    assert trainkit.Checkpointer().restore({})[0] == 4


@pytest.fixture
def progress_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh reporter of rank 0 that writes at every report, unthrottled."""
    from orchestrator import trainkit

    path = tmp_path / "progress.json"
    monkeypatch.setenv("CVMJOB_PROGRESS_FILE", str(path))
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setattr(trainkit, "_reporter", None)
    monkeypatch.setattr(trainkit, "_REPORT_EVERY_SECONDS", 0.0)
    return path


def test_named_metrics_are_kept_until_a_report_of_the_same_name_replaces_them(progress_file: Path) -> None:
    import numpy as np

    from orchestrator import trainkit
    from orchestrator.contract import Progress

    def written() -> Progress:
        return Progress.model_validate_json(progress_file.read_bytes())

    trainkit.report(8, 0.9)
    assert (written().step, written().metrics, written().metrics_step) == (8, {}, None)
    trainkit.report(9, 0.8, val_loss=0.5, val_accuracy=np.float32(0.75))
    trainkit.report(10, 0.7)
    assert (written().step, written().loss, written().metrics, written().metrics_step) == \
        (10, 0.7, {"val_loss": 0.5, "val_accuracy": 0.75}, 9)
    trainkit.report(10, 0.7, **{"val_loss": 0.4, "test.top5": 1})  # the same step: still news
    assert written().metrics == {"val_loss": 0.4, "val_accuracy": 0.75, "test.top5": 1.0}
    assert written().metrics_step == 10
    assert json.loads(progress_file.read_text())["metrics"]["test.top5"] == 1.0


@pytest.mark.parametrize(("name", "value", "problem"), [
    ("val loss", 0.5, "the name must match [A-Za-z_][A-Za-z0-9_.]*"),
    ("1st", 0.5, "the name must match"),
    ("val_loss", float("nan"), "nan is not a finite number"),
    ("val_loss", float("-inf"), "-inf is not a finite number"),
    ("val_accuracy", True, "True (bool) is not a real number"),
    ("val_loss", "0.5", "'0.5' (str) is not a real number"),
    ("val_loss", None, "None (NoneType) is not a real number"),
])
def test_a_bad_metric_is_refused_by_name_and_nothing_is_written(
        progress_file: Path, name: str, value: object, problem: str) -> None:
    from orchestrator import trainkit

    trainkit.report(3, 0.5, val_loss=0.25)
    before = progress_file.read_bytes()
    with pytest.raises(ValueError) as raised:
        trainkit.report(4, 0.4, **{name: value, "fine": 1.0})  # type: ignore[arg-type]
    assert str(raised.value).startswith(f"trainkit.report: metric {name!r}: {problem}")
    assert progress_file.read_bytes() == before
    trainkit.report(5, 0.3)  # the bad report left nothing half-applied
    assert json.loads(progress_file.read_text())["metrics"] == {"val_loss": 0.25}
