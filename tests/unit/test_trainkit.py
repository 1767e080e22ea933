"""trainkit across two real gloo processes under torchrun, and its checkpoints in this process."""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[2]

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


# The same request, with a state sharded over the two ranks (a DTensor: each rank holds its own half) and saved
# by torch.distributed.checkpoint: in the background at step 2, in the loop at the requested step 5.
SHARDED_SCRIPT = """
import os, signal, sys
import torch, torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import DTensor, Shard
from orchestrator import trainkit

dist.init_process_group("gloo")
rank = dist.get_rank()
mesh = init_device_mesh("cpu", (2,))
def halves(value):
    return {"w": DTensor.from_local(torch.full((2,), float(value)), mesh, [Shard(0)])}
ckpt = trainkit.Checkpointer(every=3)
for step in range(int(sys.argv[1])):
    state = halves(100 * rank + step)
    if rank == 1 and step == 5:
        os.kill(os.getpid(), signal.SIGUSR1)
    if ckpt.should_save(step):
        ckpt.save(step, state, sharded=True)
    if ckpt.stop_requested:
        break
os.environ["CVMJOB_RESUME_FROM"] = str(ckpt.directory / "step-00000005")
start, restored = trainkit.Checkpointer().restore(halves(-1))
print(f"rank={rank} start={start} mine={restored['w'].to_local()[0].item():.0f}", flush=True)
trainkit.finish()
"""


def torchrun(tmp_path: Path, steps: int, resume_from: str = "", script: str = SCRIPT) -> str:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1",
           "CVMJOB_CHECKPOINT_DIR": str(tmp_path / "ckpt"), "CVMJOB_PROGRESS_FILE": str(tmp_path / "progress.json"),
           "CVMJOB_RESUME_FROM": resume_from}
    (tmp_path / "train.py").write_text(script)
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


def test_a_sharded_checkpoint_holds_every_ranks_shards_once_committed_and_restores_each_rank_its_own(
        tmp_path: Path) -> None:
    out = torchrun(tmp_path, steps=20, script=SHARDED_SCRIPT)
    assert "rank=0 start=6 mine=5" in out
    assert "rank=1 start=6 mine=105" in out
    checkpoints = tmp_path / "ckpt"
    assert sorted(p.name for p in checkpoints.iterdir()) == ["step-00000002", "step-00000005"]  # no folder left
    for checkpoint in checkpoints.iterdir():
        assert sorted(p.name for p in checkpoint.iterdir()) == [".metadata", "__0_0.distcp", "__1_0.distcp"]


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


def test_the_total_reaches_the_progress_file_and_is_kept_until_another_is_given(progress_file: Path) -> None:
    from orchestrator import trainkit
    from orchestrator.contract import Progress

    trainkit.report(0, 1.0, total=500)
    trainkit.report(1, 0.9)  # said once, kept
    assert Progress.model_validate_json(progress_file.read_bytes()).total_steps == 500
    for bad in (0, -3, True, 2.5):
        with pytest.raises(ValueError, match=r"total=.*: the number of steps, a positive int"):
            trainkit.report(2, 0.8, total=bad)  # type: ignore[arg-type]


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


# -- checkpoints in this process: the background write, its commit and its errors ----------------------------------
@pytest.fixture
def fresh_writer(monkeypatch: pytest.MonkeyPatch) -> None:
    """A writer of this test's own, so that no test waits on another's write in flight."""
    from orchestrator import trainkit

    monkeypatch.setattr(trainkit, "_writer", trainkit._Writer())


class GatedSave:
    """torch.save that waits for the test to open its gate, counting the writes in progress."""

    def __init__(self) -> None:
        import torch

        self.real = torch.save
        self.started = threading.Event()
        self.gate = threading.Event()
        self.calls = 0
        self.in_progress = 0
        self.most_in_progress = 0
        self._lock = threading.Lock()

    def __call__(self, obj: Any, f: Any) -> None:
        with self._lock:
            self.calls += 1
            self.in_progress += 1
            self.most_in_progress = max(self.most_in_progress, self.in_progress)
        self.started.set()
        if not self.gate.wait(10):
            raise TimeoutError("the test never opened the gate")
        self.real(obj, f)
        with self._lock:
            self.in_progress -= 1


@pytest.fixture
def gated_save(monkeypatch: pytest.MonkeyPatch, fresh_writer: None) -> Iterator[GatedSave]:
    import torch

    gated = GatedSave()
    monkeypatch.setattr(torch, "save", gated)
    yield gated
    gated.gate.set()  # a failing test must not leave the writer blocked


def restored(directory: Path, step: int, monkeypatch: pytest.MonkeyPatch, template: Any = None) -> tuple[int, Any]:
    from orchestrator import trainkit

    monkeypatch.setenv("CVMJOB_RESUME_FROM", str(directory / f"step-{step:08d}"))
    return trainkit.Checkpointer(directory=directory).restore(template)


def visible(directory: Path) -> list[str]:
    """What the agent's uploader takes for complete checkpoints."""
    from orchestrator.agent.manifest import scan

    return [c.name for c in scan(directory)]


def test_an_async_save_holds_the_state_of_its_step_and_appears_only_once_written(
        tmp_path: Path, gated_save: GatedSave, monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    from orchestrator import trainkit

    ckpt = trainkit.Checkpointer(directory=tmp_path)
    weights = torch.zeros(4)
    ckpt.save(7, {"w": weights, "step": 7})
    weights.add_(1)  # the next training step, while the write waits at the gate
    assert gated_save.started.wait(10)
    assert visible(tmp_path) == []
    assert [p.name for p in tmp_path.iterdir()] == [f".step-00000007.{os.getpid()}.tmp"]
    gated_save.gate.set()
    ckpt.wait()
    assert [p.name for p in tmp_path.iterdir()] == ["step-00000007"]
    start, state = restored(tmp_path, 7, monkeypatch)
    assert (start, state["step"]) == (8, 7)
    assert torch.equal(state["w"], torch.zeros(4))


def test_a_save_waits_for_the_write_before_it_so_two_never_overlap(tmp_path: Path, gated_save: GatedSave) -> None:
    import torch

    from orchestrator import trainkit

    ckpt = trainkit.Checkpointer(directory=tmp_path)
    ckpt.save(1, {"w": torch.ones(2)})
    assert gated_save.started.wait(10)
    second = threading.Thread(target=ckpt.save, args=(2, {"w": torch.ones(2)}))
    second.start()
    second.join(0.5)
    assert second.is_alive()  # held back by the first write
    assert gated_save.calls == 1
    gated_save.gate.set()
    second.join(10)
    ckpt.wait()
    assert (gated_save.calls, gated_save.most_in_progress) == (2, 1)
    assert visible(tmp_path) == ["step-00000001", "step-00000002"]


def test_a_requested_save_is_committed_when_save_returns(
        tmp_path: Path, gated_save: GatedSave, progress_file: Path) -> None:
    import torch

    from orchestrator import trainkit

    ckpt = trainkit.Checkpointer(every=100, directory=tmp_path)
    signal.raise_signal(signal.SIGUSR1)
    trainkit.report(5, 0.1)
    assert ckpt.should_save(5)
    opener = threading.Timer(0.3, gated_save.gate.set)  # an asynchronous save would return before it opens
    opener.start()
    ckpt.save(5, {"w": torch.ones(2)})
    assert visible(tmp_path) == ["step-00000005"]
    assert (tmp_path / "step-00000005" / trainkit.STATE_FILE).stat().st_size > 0
    assert json.loads(progress_file.read_text())["stopped"] is True
    opener.join()


def test_a_failed_background_write_is_raised_by_the_next_save_and_by_finish(
        tmp_path: Path, fresh_writer: None, monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    from orchestrator import trainkit

    def disk_full(obj: Any, f: Any) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(torch, "save", disk_full)
    ckpt = trainkit.Checkpointer(directory=tmp_path)
    ckpt.save(1, {"w": torch.ones(2)})
    with pytest.raises(trainkit.CheckpointError,
                       match=r"checkpoint step-00000001 was not written: .*No space left on device"):
        ckpt.save(2, {"w": torch.ones(2)})
    ckpt.save(3, {"w": torch.ones(2)})
    exits: list[int] = []
    monkeypatch.setattr(os, "_exit", exits.append)  # finish must raise before it ends the process
    with pytest.raises(trainkit.CheckpointError, match="checkpoint step-00000003 was not written"):
        trainkit.finish()
    assert exits == []
    assert visible(tmp_path) == []


def test_saves_of_the_same_tensors_refill_one_cpu_copy(
        tmp_path: Path, fresh_writer: None, monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    from orchestrator import trainkit

    written: list[torch.Tensor] = []  # held: a buffer freed after its write could come back from the allocator
    real = torch.save

    def recording(obj: Any, f: Any) -> None:
        written.append(obj["w"])
        real(obj, f)

    monkeypatch.setattr(torch, "save", recording)
    ckpt = trainkit.Checkpointer(directory=tmp_path)
    weights = torch.arange(1000.0)
    for step in (1, 2):
        ckpt.save(step, {"w": weights})
        ckpt.wait()
    assert written[0].data_ptr() == written[1].data_ptr() != weights.data_ptr()


@pytest.fixture
def gloo_world(monkeypatch: pytest.MonkeyPatch, fresh_writer: None) -> Iterator[None]:
    """torch.distributed in this process: a gloo group of one rank."""
    import torch.distributed as dist

    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    yield
    dist.destroy_process_group()


def gated(monkeypatch: pytest.MonkeyPatch, owner: type, name: str) -> tuple[threading.Event, threading.Event]:
    """(reached, gate): ``owner.name`` waits for the gate once it is reached."""
    reached, gate = threading.Event(), threading.Event()
    real: Callable[..., Any] = getattr(owner, name)

    def waiting(*args: Any, **kwargs: Any) -> Any:
        reached.set()
        if not gate.wait(10):
            raise TimeoutError("the test never opened the gate")
        return real(*args, **kwargs)

    monkeypatch.setattr(owner, name, waiting)
    return reached, gate


def test_a_sharded_save_is_committed_after_dcp_wrote_its_metadata_and_restores_in_place(
        tmp_path: Path, gloo_world: None, monkeypatch: pytest.MonkeyPatch) -> None:
    import torch
    from torch.distributed.checkpoint.filesystem import FileSystemWriter

    from orchestrator import trainkit

    model = torch.nn.Linear(3, 2)
    saved = {k: v.clone() for k, v in model.state_dict().items()}
    metadata_reached, gate = gated(monkeypatch, FileSystemWriter, "finish")
    ckpt = trainkit.Checkpointer(directory=tmp_path)
    ckpt.save(4, {"model": model.state_dict(), "step": 4}, sharded=True)
    with torch.no_grad():
        model.weight.add_(1)  # the next training step, while the write is in flight
    try:
        assert metadata_reached.wait(10)
        assert visible(tmp_path) == []  # the shards are written, DCP's metadata not yet
        (tmp,) = tmp_path.iterdir()
        assert sorted(p.name for p in tmp.iterdir()) == ["__0_0.distcp"]
    finally:
        gate.set()
    ckpt.wait()
    assert visible(tmp_path) == ["step-00000004"]
    assert sorted(p.name for p in (tmp_path / "step-00000004").iterdir()) == [".metadata", "__0_0.distcp"]

    fresh = torch.nn.Linear(3, 2)
    start, state = restored(tmp_path, 4, monkeypatch, {"model": fresh.state_dict(), "step": -1})
    assert (start, state["step"]) == (5, 4)
    assert all(torch.equal(fresh.state_dict()[k], saved[k]) for k in saved)  # loaded into the module in place
    with pytest.raises(TypeError, match="sharded checkpoint: it loads into a dict"):
        restored(tmp_path, 4, monkeypatch, torch.zeros(1))


def test_a_sharded_save_over_several_nodes_is_refused_before_anything_is_written(
        tmp_path: Path, gloo_world: None, monkeypatch: pytest.MonkeyPatch) -> None:
    import torch
    import torch.distributed as dist

    from orchestrator import trainkit

    monkeypatch.setattr(dist, "get_world_size", lambda group=None: 16)
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "8")
    ckpt = trainkit.Checkpointer(directory=tmp_path)
    with pytest.raises(trainkit.CheckpointError, match="needs every rank on one node, and this job has 16 ranks, 8"):
        ckpt.save(1, {"w": torch.ones(2)}, sharded=True)
    assert not tmp_path.exists() or list(tmp_path.iterdir()) == []
