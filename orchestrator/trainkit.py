"""The training side of cvmjob's contract in three lines of a user's script (design.md §3).

    from orchestrator import trainkit

    ckpt = trainkit.Checkpointer(every=100)          # reads CVMJOB_*; SIGUSR1 = "checkpoint now"
    start, state = ckpt.restore(initial_state)       # from CVMJOB_RESUME_FROM, or (0, initial_state)
    for step in range(start, total_steps):
        loss = train_one_step(...)
        trainkit.report(step, loss)                  # rank 0: progress for the heartbeat and hang detection
        if ckpt.should_save(step):                   # every rank, every step: it is a collective
            ckpt.save(step, current_state())         # a CPU copy now; rank 0 writes step-<N> in the background
        if ckpt.stop_requested:                      # a requested checkpoint was just committed: stop here
            break
    trainkit.finish()                                # waits for the write, barrier, destroy the group, exit 0

Rules the agent relies on:
- ``step`` is the index of the step just completed; ``save(step, ...)`` writes ``step-<step>`` and ``restore``
  returns ``step + 1``: a resumed run neither repeats nor skips a step.
- ``should_save`` all-reduces the "checkpoint requested" flag, so every rank saves and stops at the same step
  even though SIGUSR1 reaches the ranks at slightly different moments. Call it on every rank at every step.
- After a stop the script should exit without writing final outputs; the agent that asked for the checkpoint
  ends the attempt (preempted or cancelled) whatever the exit code.
- When torchrun restarts the workers of a single node in place (``--max-restarts``), ``restore`` resumes from the
  newest checkpoint in the folder rather than the one the attempt started from.
- Without the agent (no CVMJOB_* variables) everything still works: checkpoints go to ./checkpoints and
  progress reports are dropped (their metrics are still checked, so a bad one fails the same way everywhere).
- ``report(step, loss, val_loss=0.4, val_accuracy=0.9)`` adds named metrics: a name matches
  ``[A-Za-z_][A-Za-z0-9_.]*``, a value is a finite real number (not a bool), else report raises ValueError. A
  metric keeps its value until a later report of the same name, so a loss each step and validation metrics every
  few steps all reach the heartbeat (``Status.metrics``) and, when the attempt ends whatever its outcome, the
  result (``Result.metrics``), with ``metrics_step``: the step the newest of them was reported at.

Asynchronous checkpoints (the default; ``Checkpointer(async_save=False)`` writes in the loop as before):
- ``save`` copies the state off the GPU before it returns (every tensor of its dicts, lists and tuples, into CPU
  buffers that the next save of the same shapes refills, pinned for CUDA tensors; non-blocking copies, then one
  stream sync; the rest deep-copied), so the script may change its parameters as soon as ``save`` returns: the
  checkpoint holds the state of the step it is named after.
- One background thread per process writes the copy: into ``.step-<N>.<pid>.tmp``, fsynced, renamed to
  ``step-<N>``, the folder fsynced. ``step-<N>`` appears whole or not at all, exactly as a synchronous save.
- Backpressure: a process has at most one write in flight. ``save`` first waits for the previous one, so a write
  slower than the checkpoint interval slows the loop rather than queueing copies of the state in memory.
- A save that answers a request (``stop_requested``: a spot notice or a cancel) is synchronous on every rank:
  ``save`` returns once ``step-<N>`` is committed, so the ``break`` and ``finish()`` that follow come after a
  complete checkpoint, inside the notice.
- ``finish()`` (and the interpreter's exit, for a script that ends without it) waits for the write in flight;
  ``ckpt.wait()`` does too. A failed background write is raised as CheckpointError by the next ``save``,
  ``wait`` or ``finish``, naming the checkpoint that was not committed; at an exit without ``finish`` it is
  printed and the process exits 1.
- Ranks: a plain state is written by global rank 0 alone, so the other ranks neither copy nor wait (the training's
  next collective waits for rank 0's copy); only a requested save ends with a barrier, after the commit.
- Memory: rank 0 keeps one CPU copy of the state between saves.

Sharded checkpoints, ``save(step, state, sharded=True)``, for a state whose tensors are spread over the ranks
(FSDP, DTensor; ``torch.distributed.checkpoint.state_dict.get_state_dict`` makes one) with
``torch.distributed.checkpoint`` (DCP):
- Every rank writes its own shards with DCP's ``async_save``, which copies them to CPU memory before it returns (a
  synchronous ``save`` when the save is requested or async_save is off), into the one folder
  ``.step-<N>.<rank 0's pid>.tmp``; rank 0 writes DCP's ``.metadata`` after every rank's shards, then renames the
  folder to ``step-<N>``. DCP's collectives run on a gloo group of
  the Checkpointer's own, so its background thread never interleaves them with the training's collectives.
- Every rank must write to the same folder, so every rank must be on one node (``LOCAL_WORLD_SIZE`` equal to the
  world size): each node's agent uploads its own local folder, and a checkpoint spread over nodes would be taken
  as complete with node 0's shards alone. On several nodes a sharded save raises CheckpointError; save a full
  state on rank 0 instead (``StateDictOptions(full_state_dict=True, cpu_offload=True)``).
- ``restore(template)`` reads either layout: a folder with ``.metadata`` is loaded by DCP into the template's
  tensors in place (the template needs every key; for a fresh optimizer, get_state_dict gives one), a
  ``state.pt`` by ``torch.load``.

The progress file, for a script without trainkit (contract.Progress): rank 0 alone writes a JSON object to a
temporary file in the folder of ``$CVMJOB_PROGRESS_FILE`` and renames it onto that path (``os.replace``), so the
agent never reads half a file. A file that does not validate (a field missing or unknown, a NaN metric) is
ignored whole. Its fields:

- ``step`` (required, int): the index of the step just completed; hang detection watches it alone;
- ``time`` (required, number): Unix time of the report;
- ``loss`` (number or null), ``stopped`` (bool: the ranks stopped after a requested checkpoint);
- ``metrics`` (object: name -> finite number, the latest value of each) and ``metrics_step`` (int or null);
- ``total_steps`` (int >= 1 or null): the steps the script means to run (``cvmjob run`` shows step N of M, an ETA).

For example ``{"step": 120, "time": 1767225600.0, "loss": 0.31, "metrics": {"val_loss": 0.42}, "metrics_step":
120}``. Write it at most a few times a second (trainkit: every 0.5 s at most, and at each checkpoint and the end).

torch is imported only inside the functions that need it: the agent imports this module's names without torch.
"""

from __future__ import annotations

import atexit
import copy
import math
import numbers
import os
import shutil
import signal
import sys
import time
from collections.abc import Callable, Hashable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any, TypeVar

from orchestrator.contract import (
    CHECKPOINT_SIGNAL,
    METRIC_NAME,
    Progress,
    TrainingEnv,
    checkpoint_name,
    checkpoint_step,
)

if TYPE_CHECKING:
    import torch
    from torch.distributed import ProcessGroup

T = TypeVar("T")
STATE_FILE = "state.pt"  # inside a checkpoint directory written by save()
DCP_METADATA = ".metadata"  # what torch.distributed.checkpoint writes last, on rank 0, into a sharded checkpoint
_REPORT_EVERY_SECONDS = 0.5  # the agent reads progress about once a second; writing each step would be waste


def rank() -> int:
    """The global rank torchrun gave this process (0 outside torchrun)."""
    return int(os.environ.get("RANK", "0"))


def _write_atomically(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


class _Reporter:
    """Rank 0's progress file, written at most every _REPORT_EVERY_SECONDS; save() and finish() flush the rest."""

    def __init__(self) -> None:
        target = os.environ.get(TrainingEnv.PROGRESS_FILE.value)
        self.path = Path(target) if target and rank() == 0 else None
        self.step: int | None = None
        self.loss: float | None = None
        self.stopped = False
        self.metrics: dict[str, float] = {}
        self.metrics_step: int | None = None
        self.total: int | None = None
        self._reports_with_metrics = 0  # a report of metrics at the step already written is still news
        self._written: tuple[int | None, bool, int] = (None, False, 0)
        self._written_at = 0.0

    def report(self, step: int, loss: float | None, metrics: dict[str, float], total: int | None = None) -> None:
        self.step, self.loss = step, loss
        self.total = total or self.total
        if metrics:
            self.metrics = {**self.metrics, **metrics}
            self.metrics_step = step
            self._reports_with_metrics += 1
        if time.time() - self._written_at >= _REPORT_EVERY_SECONDS:
            self.flush()

    def flush(self) -> None:
        news = (self.step, self.stopped, self._reports_with_metrics)
        if self.path is None or self.step is None or self._written == news:
            return
        doc = Progress(step=self.step, loss=self.loss, time=time.time(), stopped=self.stopped,
                       metrics=self.metrics, metrics_step=self.metrics_step, total_steps=self.total)
        _write_atomically(self.path, doc.model_dump_json().encode())
        self._written, self._written_at = news, doc.time


_reporter: _Reporter | None = None


def _get_reporter() -> _Reporter:
    global _reporter
    if _reporter is None:
        _reporter = _Reporter()
    return _reporter


def _metric_value(name: str, value: object) -> float:
    """``value`` as the float the progress file carries, or a ValueError that names the metric and the problem."""
    if not METRIC_NAME.fullmatch(name):
        raise ValueError(f"trainkit.report: metric {name!r}: the name must match {METRIC_NAME.pattern}")
    # bool is an int to Python, but True as a validation score is a bug in the script, not a value.
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"trainkit.report: metric {name!r}: {value!r} ({type(value).__name__}) is not a real "
                         f"number; pass a float (tensor.item() for a tensor)")
    number = float(value)
    if not math.isfinite(number):
        raise ValueError(f"trainkit.report: metric {name!r}: {number} is not a finite number")
    return number


def report(step: int, loss: float | None = None, *, total: int | None = None, **metrics: float) -> None:
    """Tell the agent the step just completed, its loss and any named metrics (``val_loss=0.4``). Cheap to call
    every step; only rank 0 writes. A metric keeps its value until a later report of the same name. ``total``: the
    number of steps the script means to run (``cvmjob run`` shows step N of M and an ETA); no metric is named so."""
    if total is not None and (isinstance(total, bool) or not isinstance(total, int) or total < 1):
        raise ValueError(f"trainkit.report: total={total!r}: the number of steps, a positive int")
    checked = {name: _metric_value(name, value) for name, value in metrics.items()}
    _get_reporter().report(step, None if loss is None else float(loss), checked, total)


class CheckpointError(RuntimeError):
    """A checkpoint that was not written, or a save that trainkit cannot make complete."""


class _Writer:
    """The process's checkpoint writer: one background thread, and at most one write in flight."""

    def __init__(self) -> None:
        self._thread: ThreadPoolExecutor | None = None
        self._in_flight: tuple[str, Future[None]] | None = None

    def submit(self, name: str, write: Callable[[], None]) -> None:
        """Run ``write``, which commits checkpoint ``name``, in the background. The caller waited for the last."""
        if self._thread is None:
            # Its worker is joined at the interpreter's exit before the atexit hooks run, so _at_exit sees the end.
            self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="trainkit-checkpoint")
            atexit.register(self._at_exit)
        self._in_flight = (name, self._thread.submit(write))

    def wait(self) -> None:
        """Block until the write in flight has ended; CheckpointError if it failed."""
        if self._in_flight is None:
            return
        name, write = self._in_flight
        self._in_flight = None
        try:
            write.result()
        except Exception as exc:
            raise CheckpointError(
                f"trainkit: checkpoint {name} was not written: its background write failed ({type(exc).__name__}: "
                f"{exc}); it was never renamed into place, so the newest complete checkpoint is an older one") from exc

    def _at_exit(self) -> None:
        try:
            self.wait()
        except CheckpointError as exc:
            print(exc, file=sys.stderr, flush=True)
            os._exit(1)  # exiting as if all went well would hide that the last checkpoint is lost


_writer = _Writer()


def _fsync_directory(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _commit(tmp: Path, final: Path) -> None:
    """Rename the written folder ``tmp`` to ``final``: the uploader sees the whole checkpoint or nothing of it."""
    _fsync_directory(tmp)  # the files' names are on disk before the name that makes them a checkpoint
    if final.exists():  # the same step saved again (a rerun): the newer state wins
        stale = final.with_name(f".{final.name}.{os.getpid()}.stale")
        final.rename(stale)
        shutil.rmtree(stale)
    tmp.rename(final)
    _fsync_directory(final.parent)


def _write_plain(tmp: Path, final: Path, state: Any) -> None:
    import torch

    tmp.mkdir(parents=True, exist_ok=True)
    with (tmp / STATE_FILE).open("wb") as f:
        torch.save(state, f)
        f.flush()
        os.fsync(f.fileno())
    _commit(tmp, final)


def _coordinator_pid(group: ProcessGroup | None) -> int:
    """Rank 0's pid, on every rank: it names the temporary folder that all of them write a sharded checkpoint to."""
    if group is None:
        return os.getpid()
    import torch.distributed as dist

    pid = [os.getpid()]
    dist.broadcast_object_list(pid, src=0, group=group)
    return int(pid[0])


def _load_sharded(path: Path, template: T) -> T:
    from torch.distributed.checkpoint.state_dict_loader import load

    if not isinstance(template, dict):
        raise TypeError(f"trainkit: {path} is a sharded checkpoint: it loads into a dict of the state's tensors "
                        f"(the one given to save), not into a {type(template).__name__}")
    load(template, checkpoint_id=path)
    return template


def _tensors(value: Any, path: tuple[Hashable, ...] = ()) -> Iterator[tuple[tuple[Hashable, ...], torch.Tensor]]:
    """The tensors of a state (nested dicts, lists and tuples), each with its place in it."""
    import torch

    if isinstance(value, torch.Tensor):
        yield path, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _tensors(item, (*path, key))
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            yield from _tensors(item, (*path, index))


class _Staging:
    """A state's copy in CPU memory, made at the step boundary: the buffers of one save are refilled by the next
    (pinned for CUDA tensors), so saves of the same shapes allocate nothing."""

    def __init__(self) -> None:
        self._buffers: dict[tuple[Hashable, ...], torch.Tensor] = {}

    def copy(self, state: Any) -> Any:
        import torch

        copies: dict[int, Any] = {}
        streams: set[torch.cuda.Stream] = set()
        for path, tensor in _tensors(state):
            copies[id(tensor)] = self._refill(path, tensor)
            if tensor.is_cuda:
                streams.add(torch.cuda.current_stream(tensor.device))
        for stream in streams:  # the non-blocking copies were queued on it
            stream.synchronize()
        # deepcopy takes the tensors' copies from its memo and copies the rest as torch.save would keep it (an
        # OrderedDict's _metadata, a namedtuple, a number).
        return copy.deepcopy(state, copies)

    def _refill(self, path: tuple[Hashable, ...], tensor: torch.Tensor) -> torch.Tensor:
        import torch

        buffer = self._buffers.get(path)
        if buffer is None or buffer.shape != tensor.shape or buffer.dtype != tensor.dtype:
            # The same strides as the tensor, so that the copy is one straight transfer.
            buffer = torch.empty_like(tensor, device="cpu", pin_memory=tensor.is_cuda)
            self._buffers[path] = buffer
        return buffer.copy_(tensor.detach(), non_blocking=tensor.is_cuda)


class Checkpointer:
    """Checkpoints in $CVMJOB_CHECKPOINT_DIR, restore from $CVMJOB_RESUME_FROM, and the SIGUSR1 request.

    Construct it in the main thread (it installs a signal handler) before the training loop. With
    ``async_save=False`` every save writes inside ``save`` and every rank waits for it, as a requested save does."""

    def __init__(self, every: int | None = None, directory: str | os.PathLike[str] | None = None,
                 async_save: bool = True) -> None:
        env = os.environ
        self.directory = Path(directory or env.get(TrainingEnv.CHECKPOINT_DIR.value) or "checkpoints")
        interval = env.get(TrainingEnv.CHECKPOINT_INTERVAL.value)
        # The spec's checkpoints.interval_steps wins over the script's default, so a job can tune it.
        self.every = int(interval) if interval else every
        self.resume_from = env.get(TrainingEnv.RESUME_FROM.value, "")
        self.async_save = async_save
        self.stop_requested = False
        self._signalled = False
        self._staging = _Staging()
        self._sharded_group: ProcessGroup | None = None
        signal.signal(CHECKPOINT_SIGNAL, self._on_signal)

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self._signalled = True

    def resume_path(self) -> Path | None:
        """The checkpoint to start from: $CVMJOB_RESUME_FROM, or a newer one of this node's folder after torchrun
        restarted the workers in place (--max-restarts: its environment, and so CVMJOB_RESUME_FROM, is the one of
        the first start). Only on a single node, where every rank sees the same folder and picks the same one."""
        chosen = Path(self.resume_from) if self.resume_from else None
        env = os.environ
        if int(env.get("TORCHELASTIC_RESTART_COUNT", "0")) > 0 and env.get("LOCAL_WORLD_SIZE") == env.get("WORLD_SIZE"):
            local = [(step, p) for p in self.directory.glob("step-*") if (step := checkpoint_step(p.name)) is not None]
            newest = max(local, default=None, key=lambda found: found[0])
            if newest is not None and (chosen is None or newest[0] > (checkpoint_step(chosen.name) or -1)):
                chosen = newest[1]
        return chosen

    def restore(self, default: T) -> tuple[int, T]:
        """(first step to run, state): from the checkpoint resume_path() names, or (0, default). A sharded
        checkpoint is loaded into ``default``'s tensors in place, a plain one is read whole (the module docstring)."""
        path = self.resume_path()
        if path is None:
            return 0, default
        step = checkpoint_step(path.name)
        if step is None:
            raise ValueError(f"{TrainingEnv.RESUME_FROM.value}={path} is not named step-<N>")
        if (path / DCP_METADATA).is_file():
            return step + 1, _load_sharded(path, default)
        import torch

        state: T = torch.load(path / STATE_FILE if path.is_dir() else path, map_location="cpu", weights_only=True)
        return step + 1, state

    def should_save(self, step: int) -> bool:
        """True when this step is a checkpoint step or a checkpoint was requested on any rank (a collective)."""
        requested = self._signalled
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
            import torch

            device = torch.device("cuda", torch.cuda.current_device()) if dist.get_backend() == "nccl" else None
            flag = torch.tensor([1 if requested else 0], dtype=torch.int32, device=device)
            dist.all_reduce(flag, op=dist.ReduceOp.MAX)
            requested = bool(flag.item())
        if requested:
            self.stop_requested = True
        return requested or (self.every is not None and (step + 1) % self.every == 0)

    def save(self, step: int, state: Any, *, sharded: bool = False) -> Path:
        """Checkpoint ``state`` as ``step-<step>`` and return its path; call it on every rank. Plain: rank 0 writes
        ``state`` with torch.save. ``sharded=True``: every rank writes its part with torch.distributed.checkpoint.
        In the background unless a checkpoint was requested or async_save is off (the module docstring)."""
        final = self.directory / checkpoint_name(step)
        # The backpressure; and the CPU buffers that the last write read from may now be refilled.
        _writer.wait()
        in_loop = self.stop_requested or not self.async_save
        if sharded:
            self._save_sharded(final, state, in_loop)
        elif rank() == 0:
            self._save_plain(final, state, in_loop)
        if in_loop:
            _barrier()
        reporter = _get_reporter()
        reporter.stopped = self.stop_requested
        reporter.flush()
        return final

    def wait(self) -> None:
        """Block until this process's checkpoint write in flight is committed; CheckpointError if it failed."""
        _writer.wait()

    def _save_plain(self, final: Path, state: Any, in_loop: bool) -> None:
        tmp = self.directory / f".{final.name}.{os.getpid()}.tmp"
        if in_loop:
            _write_plain(tmp, final, state)
            return
        staged = self._staging.copy(state)
        _writer.submit(final.name, lambda: _write_plain(tmp, final, staged))

    def _save_sharded(self, final: Path, state: Any, in_loop: bool) -> None:
        from torch.distributed.checkpoint.filesystem import FileSystemWriter
        from torch.distributed.checkpoint.state_dict_saver import AsyncSaveResponse, async_save
        from torch.distributed.checkpoint.state_dict_saver import save as save_in_loop

        group = self._dcp_group()
        tmp = self.directory / f".{final.name}.{_coordinator_pid(group)}.tmp"
        writer = FileSystemWriter(tmp)
        # DCP's coordinator: it writes the metadata once every rank's shards are written, then this rank commits.
        commits = group is None or group.rank() == 0
        if in_loop:
            save_in_loop(state, storage_writer=writer, process_group=group)
            if commits:
                _commit(tmp, final)
            return
        # DCP copies the state off the GPU itself (DTensor's and ShardedTensor's shards included).
        response = async_save(state, storage_writer=writer, process_group=group)
        written = response.upload_completion if isinstance(response, AsyncSaveResponse) else response

        def commit_once_written() -> None:
            written.result()
            if commits:
                _commit(tmp, final)

        _writer.submit(final.name, commit_once_written)

    def _dcp_group(self) -> ProcessGroup | None:
        """The gloo group that DCP's collectives run on (None without torch.distributed). Refuses several nodes."""
        import torch.distributed as dist

        if not (dist.is_available() and dist.is_initialized()):
            return None
        world = dist.get_world_size()
        local = int(os.environ.get("LOCAL_WORLD_SIZE", world))
        if local != world:
            raise CheckpointError(
                f"trainkit: a sharded checkpoint needs every rank on one node, and this job has {world} ranks, "
                f"{local} on this node: each node's agent uploads its own checkpoint folder, so rank 0's node would "
                f"commit a checkpoint without the other nodes' shards. Save a full state on rank 0 instead "
                f"(torch.distributed.checkpoint.state_dict.get_state_dict with StateDictOptions(full_state_dict=True, "
                f"cpu_offload=True), then save(step, state)), or train on one node")
        if self._sharded_group is None:
            # DCP's async save runs collectives on a thread of its own: on the training's group they would
            # interleave with the loop's (should_save's all-reduce) in a different order on each rank.
            self._sharded_group = dist.new_group(backend="gloo")
        return self._sharded_group


def _barrier() -> None:
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.barrier()


def finish(exit_code: int = 0) -> None:
    """Wait for the checkpoint write in flight (CheckpointError if it failed), then end the process without the
    gloo/NCCL teardown abort: barrier, destroy the process group, then ``os._exit`` (exiting normally aborts in
    about a third of gloo runs: shared/reference/client-recipes.md §5.2).
    """
    _writer.wait()
    _get_reporter().flush()
    sys.stdout.flush()
    sys.stderr.flush()
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(exit_code)
