"""What the spot-recovery tests and the recovery benchmark share: a copy of the quickstart whose steps take at least
a set time (so a test can act in the middle of a short run on any machine), and ways to watch a job from outside
its controller: the emulator's instances, the shipped training log, the checkpoint manifest, the call log."""

from __future__ import annotations

import json
import re
import shutil
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orchestrator.agent.manifest import read_manifest
from orchestrator.contract import JobLayout
from orchestrator.contract.tags import TAG_ATTEMPT, TAG_JOB, TAG_NODE
from orchestrator.providers.tencent import StaticCredential, TencentSdk
from orchestrator.providers.tencent.storage import ObjectStore
from tests.agent.conftest import LIGHT, PACED
from tests.emulator.conftest import make_cos
from tests.emulator_process import EmulatorProcess
from tests.waiting import wait_until

REPO = Path(__file__).resolve().parents[2]
QUICKSTART_DIR = REPO / "jobs" / "quickstart"
# The torch-free training of the fault suite, for the tests whose subject is not DDP (run it as it is: `exec python3
# tiny.py ...`, see tiny_command).
TINY = REPO / "tests" / "faults" / "job" / "tiny.py"
STATE_BUCKET = "cvmjob-ap-guangzhou-1250000000"
GONE = ("TERMINATED", "LAUNCH_FAILED")  # not running anything (LAUNCH_FAILED never booted)
_STEP = re.compile(r"^step=(\d+) loss=", re.MULTILINE)
_START = re.compile(r"start_step=(\d+)")


def job_folder(root: Path, policies: dict[str, str] | None = None) -> Path:
    """The quickstart (spec, script, dataset) plus ``paced.py``, ``tiny.py`` and recovery policies (name -> YAML) in
    a folder of its own; returns the spec's path."""
    folder = root / "job"
    folder.mkdir(parents=True)
    for name in ("job.yaml", "train.py"):
        shutil.copy(QUICKSTART_DIR / name, folder / name)
    shutil.copy(TINY, folder / TINY.name)
    shutil.copytree(QUICKSTART_DIR / "dataset", folder / "dataset")
    for name, text in PACED.items():
        (folder / name).write_text(text)
    for name, text in (policies or {}).items():
        target = folder / "policies" / "recovery" / f"{name}.yaml"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    return folder / "job.yaml"


def tiny_command(steps: int, pace: float = 0.0, every: int | None = None, extra: str = "") -> str:
    """tiny.py's command line (job_folder puts it beside the spec): ``steps`` steps of ``pace`` seconds, a checkpoint
    every ``every`` (default: the last step only), ``extra`` flags."""
    return f"exec python3 tiny.py --steps {steps} --step-seconds {pace} --every {every or steps} {extra}".strip()


def spot_overrides(steps: int, every: int, pace: float, extra: tuple[str, ...] = (), ddp: bool = False) -> list[str]:
    """``--set`` arguments: spot billing, ``steps`` steps of at least ``pace`` seconds, a checkpoint every ``every``,
    then ``extra`` (``key=value``). The training is tiny.py, or with ``ddp`` the quickstart's DDP under torchrun."""
    command = f"python paced.py {pace} --steps {steps} {LIGHT}" if ddp else tiny_command(steps, pace, every)
    sets = ["billing.mode=spot", f"train.command={command}", f"checkpoints.interval_steps={every}", *extra]
    return [arg for value in sets for arg in ("--set", value)]


def steps_in(log: str) -> list[int]:
    """The step numbers rank 0 printed (``step=<N> loss=<X>``), in order."""
    return [int(m) for m in _STEP.findall(log)]


def start_steps(log: str) -> list[int]:
    """``start_step`` of every start of the training in the log."""
    return [int(m) for m in _START.findall(log)]


def nothing_left(emulator: EmulatorProcess) -> bool:
    """Every instance is released (or never ran: LAUNCH_FAILED, listed for minutes) and no process of one lives."""
    return all(i["state"] in GONE and not i["alive"] for i in emulator.admin.instances())


@dataclass
class JobWatch:
    """One job seen from outside: through the emulator's admin API and the state bucket."""

    emulator: EmulatorProcess
    job_id: str = ""

    def __post_init__(self) -> None:
        self._cos = make_cos(self.emulator)
        self._state = ObjectStore(TencentSdk(StaticCredential(self.emulator.secret_id, self.emulator.secret_key),
                                             "ap-guangzhou", self.emulator.endpoint, self.emulator.appid), STATE_BUCKET)

    def instances(self) -> list[dict[str, Any]]:
        """The job's instances that are not gone (the admin API drops the tags of gone ones)."""
        return [
            i
            for i in self.emulator.admin.instances(processes=False)
            if i["state"] not in GONE and (not self.job_id or i.get("tags", {}).get(TAG_JOB) == self.job_id)
        ]

    def running(self, attempt: int, nodes: int = 1, timeout: float = 120) -> list[dict[str, Any]]:
        """The RUNNING instances of ``attempt`` (all ``nodes`` of them), by node; learns the job id."""

        def ready() -> list[dict[str, Any]] | None:
            found = [
                i for i in self.instances() if i["state"] == "RUNNING" and i["tags"].get(TAG_ATTEMPT) == str(attempt)
            ]
            if len(found) < nodes:
                return None
            self.job_id = self.job_id or found[0]["tags"][TAG_JOB]
            return sorted(found, key=lambda i: int(i["tags"][TAG_NODE]))

        found: list[dict[str, Any]] = wait_until(f"{nodes} RUNNING instance(s) of attempt {attempt}", ready, timeout)
        return found

    def _read(self, key: str) -> bytes:
        data: bytes = self._cos.get_object(Bucket=STATE_BUCKET, Key=key)["Body"].get_raw_stream().read()
        return data

    def log(self, attempt: int, node: int = 0) -> str:
        """The shipped log of one node of one attempt, so far."""
        prefix = JobLayout(self.job_id).logs_prefix(attempt, node)
        page = self._cos.list_objects(Bucket=STATE_BUCKET, Prefix=prefix, MaxKeys=1000)
        keys = sorted(c["Key"] for c in page.get("Contents", []))
        return "".join(self._read(k).decode(errors="replace") for k in keys)

    def last_step(self, attempt: int, nodes: int = 1) -> int:
        """The newest step any node's shipped log shows for ``attempt`` (-1: none yet)."""
        return max((s for n in range(nodes) for s in steps_in(self.log(attempt, n))), default=-1)

    def wait_for_step(self, attempt: int, step: int, nodes: int = 1, timeout: float = 300) -> int:
        # A deadline only: a DDP attempt's four torch processes took over 120 s to step 10 on CI's loaded cores.
        found: int = wait_until(
            f"attempt {attempt} to log step {step}",
            lambda: (s := self.last_step(attempt, nodes)) >= step and s + 1,
            timeout,
        )
        return found - 1

    def _document(self, key: str) -> dict[str, Any] | None:
        if not self._cos.object_exists(Bucket=STATE_BUCKET, Key=key):
            return None
        doc: dict[str, Any] = json.loads(self._read(key))
        return doc

    def manifest(self) -> list[dict[str, Any]]:
        """The complete checkpoints the manifest lists, as it has them (none before the first)."""
        manifest = read_manifest(self._state, JobLayout(self.job_id).checkpoints_prefix).manifest
        return [c.model_dump(mode="json") for c in manifest.checkpoints]

    def manifest_steps(self) -> list[int]:
        """Steps of the complete checkpoints the manifest lists (the newest last)."""
        return sorted(int(c["step"]) for c in self.manifest())

    def status(self, attempt: int, node: int = 0) -> dict[str, Any] | None:
        """The node's newest status document (its heartbeat), if it wrote one yet."""
        return self._document(JobLayout(self.job_id).status(attempt, node))

    def result(self, attempt: int, node: int = 0) -> dict[str, Any]:
        doc: dict[str, Any] = json.loads(self._read(JobLayout(self.job_id).result(attempt, node)))
        return doc

    def launches(self) -> list[float]:
        """Times (emulator clock) of the controller's RunInstances calls, failed ones included: every call but the
        first, which is the plan's DryRun (the call log does not record the DryRun flag)."""
        return [c["time"] for c in self.emulator.admin.calls(action="RunInstances")][1:]


@dataclass
class LiveCount:
    """Samples the emulator's instances in the background: the most that were ever alive together."""

    emulator: EmulatorProcess
    every: float = 0.25
    peak: int = 0
    samples: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def __enter__(self) -> LiveCount:
        self._thread = threading.Thread(target=self._run, name="live-count", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        assert self._thread is not None
        self._thread.join(10)

    def _run(self) -> None:
        admin = self.emulator.admin
        while not self._stop.is_set():
            alive = [i for i in admin.instances(processes=False) if i["state"] not in GONE]
            self.peak = max(self.peak, len(alive))
            self.samples += 1
            self._stop.wait(self.every)
