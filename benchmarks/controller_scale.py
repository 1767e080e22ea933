"""Many jobs, one controller: one ``cvmjob controller`` process drives N spot jobs on the emulator, next to the
one-process-per-job design (``cvmjob _drive <job>`` per job, as ``run --detach`` did) for M jobs, in the same run.

    python benchmarks/controller_scale.py [--jobs 1000] [--baseline-jobs 20] [--reclaims K] [--train-seconds 60]

The agents are simulated. A thousand real agents with torch do not fit on one machine, so the emulator runs in
its load mode (``--no-user-data``: instances go PENDING -> RUNNING, bill, get reclaimed and terminate, but run no
process) and this process plays every agent: for each emulated instance that is RUNNING (the admin view; its
``cvmjob:job/attempt/node`` tags say whose it is) it writes the real contract documents (contract/) through the
real COS API with the account's root keys: a Status heartbeat every --heartbeat seconds (phase training, a rising
step), then a Result "succeeded". Attempt 1 of a job trains for the submission span (N / --rate) plus
--train-seconds, so every job is in flight at once for --train-seconds and they finish at the rate they arrived;
a later attempt trains --train-seconds. K jobs are reclaimed (admin ``spot/reclaim`` with a --notice s notice) a
seeded 5-30 s into their training; the simulated agent, seeing the notice in the admin view (a real one polls the
metadata service every 2 s), writes status "preempted", its signal (contract.SIGNALS_PREFIX) and a Result
"preempted", as a real agent does, and plays the relaunched attempt like any other.

The emulator has Tencent's published API limits set through the admin API (RunInstances, TerminateInstances and
InquiryPriceRunInstances 10/s, DescribeInstances 40/s, 20/s otherwise), so throttling shows as RequestLimitExceeded
answers in its call log. Jobs arrive through the library (``api.plan`` once, ``api.submit`` per job) no faster than
--rate (8/s: the controller's RunInstances budget, 80 % of 10/s). Measured, from the emulator's call log, the
store's events and /proc:

- rss_mb: the controller process's peak RSS (VmHWM); the baseline's is the sum over its processes;
- describe_per_s: DescribeInstances calls per second, from the first submission to the last job's end;
- throttled: RequestLimitExceeded answers of any action in that window;
- reclaim_detect: the reclaim notice -> the job's RECOVERING transition (the simulated agent's reaction included);
- launch: the job submitted (its record's created_at) -> its RunInstances (the instance with the job's attempt-1
  ClientToken, staging/launch.py client_token).

The last line is exactly ``controller_scale: jobs=N rss_mb=X mb_per_job=Y describe_per_s=Z throttled=T
reclaim_detect_p95_s=R launch_p95_s=L``. Every wait has a deadline (--timeout for the whole run); the processes
and the temporary directory are removed at the end; the exit status is 1 when the controller died, a job did not
end, or a job did not succeed.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import math
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root, when run as a script
from qcloud_cos import CosConfig, CosS3Client

from orchestrator import api
from orchestrator.contract import JobLayout, Outcome, Phase, Result, Status, signal_for
from orchestrator.contract.tags import TAG_ATTEMPT, TAG_JOB, TAG_NODE
from orchestrator.emulator.catalog import INSTANCE_TYPES_BY_NAME, zones_of
from orchestrator.emulator.client import AdminClient, AdminError
from orchestrator.staging.launch import client_token
from orchestrator.state.machine import JobState
from orchestrator.state.store import Store
from tests.emulator_process import EmulatorProcess, clean_env, start_emulator

REPO = Path(__file__).resolve().parents[1]
REGION = "ap-guangzhou"
INSTANCE_TYPE = "S5.MEDIUM4"  # 2 vCPUs, no GPU: no GPU pool to run out of, the cheapest spot price
# Tencent's published per-account limits (shared/reference/landscape-wave2.md §5.1), set at their real values: the
# controller's own budget is 80 % of them, so a throttled answer means it overran its budget.
RATE_LIMITS = {
    "cvm:RunInstances": 10.0,
    "cvm:DescribeInstances": 40.0,
    "cvm:TerminateInstances": 10.0,
    "cvm:InquiryPriceRunInstances": 10.0,
    "*": 20.0,
}
SPEC = """\
# controller_scale.py's job: a spot CPU instance, no data, no image. train.command never runs: the emulator boots
# instances without running anything, and the benchmark plays the agent.
name: scale
region: {region}
instance: {{type: {instance_type}}}
billing: {{mode: spot}}
train:
  command: python train.py
snapshot: {{enabled: false}}
limits: {{max_runtime: 6h}}
"""
STEPS_PER_SECOND = 10  # the simulated training's pace: only that the step rises matters
ADMIN_POLL_SECONDS = 1.0
CALL_LOG_POLL_SECONDS = 2.0
STORE_POLL_SECONDS = 2.0
COS_WRITERS = 8  # threads writing the agents' documents: a thousand heartbeats every 5 s is 200 PUTs a second
# Threads writing the ends of attempts (a reclaim notice's, a finished training's): a real agent reacts to its own
# notice at once, not after a thousand other agents' heartbeats queued in this process.
ENDING_WRITERS = 4
STOP_SECONDS = 30.0  # a controller draining, an emulator stopping


def log(line: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} {line}", file=sys.stderr, flush=True)


# -- measuring processes -------------------------------------------------------------------------------------------
def memory_kib(pid: int) -> tuple[int, int] | None:
    """(VmHWM, VmRSS) of a live process in KiB, from /proc (psutil is not a dependency); None once it is gone."""
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    values = {}
    for line in text.splitlines():
        name, _, rest = line.partition(":")
        if name in ("VmHWM", "VmRSS"):
            values[name] = int(rest.split()[0])
    if len(values) < 2:  # a zombie has no memory lines
        return None
    return values["VmHWM"], values["VmRSS"]


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU time of a live process (/proc/<pid>/stat): on two shared cores, who used them matters."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rfind(")") + 2 :].split()  # after "pid (comm) ": fields[11], [12] are utime, stime
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@dataclass
class Watched:
    """A process of ours, the highest VmHWM and the CPU time seen of it (sampled while it lives: /proc forgets it
    at exit)."""

    name: str
    popen: subprocess.Popen[bytes]
    peak_kib: int = 0
    cpu_s: float = 0.0

    def sample(self) -> None:
        found = memory_kib(self.popen.pid)
        if found is not None:
            self.peak_kib = max(self.peak_kib, found[0])
        cpu = cpu_seconds(self.popen.pid)
        if cpu is not None:
            self.cpu_s = max(self.cpu_s, cpu)

    def stop(self, grace: float = STOP_SECONDS) -> None:
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)  # the controller drains and hands its leases back
            try:
                self.popen.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait()


# -- the emulator's call log, read as it grows ---------------------------------------------------------------------
class CallLog:
    """Every API 3.0 call the emulator answers, fetched with ``calls(since=seq)``: the emulator keeps only the last
    10 000, fewer than a long run makes. ``lost`` counts calls that dropped off before they were read."""

    def __init__(self, admin: AdminClient) -> None:
        self.admin = admin
        self.calls: list[dict[str, Any]] = []
        self.lost = 0
        self._last = max((c["seq"] for c in admin.calls()), default=0)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="call-log", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(CALL_LOG_POLL_SECONDS):
            self.read()

    def read(self) -> None:
        try:
            new = self.admin.calls(since=self._last)
        except (AdminError, OSError) as exc:
            log(f"call log: {exc}")
            return
        if new:
            self.lost += new[0]["seq"] - self._last - 1
            self._last = new[-1]["seq"]
            self.calls.extend(new)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        self.read()

    def between(self, start: float, end: float) -> list[dict[str, Any]]:
        return [c for c in self.calls if start <= c["time"] <= end]


# -- the simulated agents ------------------------------------------------------------------------------------------
@dataclass
class JobPlan:
    """What the load generator knows of a job: how long its first attempt trains, and when (into its training) it
    is reclaimed, if it is."""

    job_id: str
    first_train_seconds: float
    reclaim_after: float | None = None


@dataclass
class Agent:
    job_id: str
    attempt: int
    node: int
    instance_id: str
    client_token: str | None
    created_at: float  # RunInstances, on the emulator's clock (the wall clock: nothing advances it)
    train_seconds: float
    running_since: float | None = None
    seq: int = 0
    beat_at: float = 0.0
    busy: bool = False  # a heartbeat is in flight
    ending: bool = False  # the attempt's end is being written
    done: bool = False  # the Result is written (or the instance went away)
    reclaim_asked: bool = False
    # Held while a heartbeat or the end is written: a routine beat queued before the end and put after it hid a
    # reclaim for half a minute (a real agent's status never goes back from an ended phase).
    lock: threading.Lock = field(default_factory=threading.Lock)

    def step(self, now: float) -> int:
        return int((now - (self.running_since or now)) * STEPS_PER_SECOND)


@dataclass(frozen=True)
class Reclaim:
    job_id: str
    instance_id: str
    notice_at: float


class Agents:
    """Plays the agent of every RUNNING instance whose job it was told of, through the real COS API."""

    def __init__(self, emulator: EmulatorProcess, bucket: str, heartbeat: float, train_seconds: float,
                 notice: float) -> None:
        self.admin = emulator.admin
        self.emulator = emulator
        self.bucket = bucket
        self.heartbeat = heartbeat
        self.train_seconds = train_seconds
        self.notice = notice
        self.jobs: dict[str, JobPlan] = {}
        self.agents: dict[tuple[str, int, int], Agent] = {}
        self.reclaims: list[Reclaim] = []
        self.signalled: dict[tuple[str, int], float] = {}  # (job, attempt) -> when its preempted signal was put
        self.write_errors = 0
        self.writes = 0
        self.peak_training = 0
        self._local = threading.local()
        self._pool = ThreadPoolExecutor(COS_WRITERS, thread_name_prefix="agent-cos")
        self._ending = ThreadPoolExecutor(ENDING_WRITERS, thread_name_prefix="agent-end")
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="agents", daemon=True)

    def add(self, job: JobPlan) -> None:
        self.jobs[job.job_id] = job

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)
        self._pool.shutdown(wait=True, cancel_futures=True)
        self._ending.shutdown(wait=True, cancel_futures=True)

    def _cos(self) -> CosS3Client:
        client: CosS3Client | None = getattr(self._local, "cos", None)
        if client is None:  # one client per writer thread: the SDK's session is not shared across threads
            e = self.emulator
            config = CosConfig(Region=REGION, SecretId=e.secret_id, SecretKey=e.secret_key, Scheme="http",
                               IP="127.0.0.1", Port=e.port, ServiceDomain=e.endpoint)
            client = self._local.cos = CosS3Client(config, retry=1)
        return client

    def _run(self) -> None:
        while not self._stop.wait(ADMIN_POLL_SECONDS):
            try:
                self.round(self.admin.instances())
            except (AdminError, OSError) as exc:
                log(f"load generator: {exc}")

    def round(self, instances: list[dict[str, Any]]) -> None:
        now = time.time()
        live = set()
        for view in instances:
            tags = view.get("tags") or {}
            job = self.jobs.get(tags.get(TAG_JOB, ""))
            if job is None:
                continue
            key = (job.job_id, int(tags[TAG_ATTEMPT]), int(tags.get(TAG_NODE, "0")))
            live.add(key)
            agent = self.agents.get(key)
            if agent is None:
                train = job.first_train_seconds if key[1] == 1 else self.train_seconds
                agent = self.agents[key] = Agent(*key, view["instance_id"], view.get("client_token"),
                                                 float(view["created_at"]), train)
            if agent.done or view["state"] != "RUNNING":
                if view["state"] in ("TERMINATING", "SHUTDOWN"):
                    agent.done = True
                continue
            if agent.running_since is None:
                agent.running_since = now
            self._act(agent, job, view, now)
        for key, agent in self.agents.items():
            if key not in live:
                agent.done = True  # released: nobody is left to report
        training = sum(1 for a in self.agents.values() if a.running_since is not None and not a.done)
        self.peak_training = max(self.peak_training, training)

    def _act(self, agent: Agent, job: JobPlan, view: dict[str, Any], now: float) -> None:
        if agent.ending:
            return
        if view.get("notice_at") is not None:  # the reclaim notice, as the metadata service would show it
            self._end(agent, self._preempted, agent, view, now)
            return
        if (
            agent.attempt == 1
            and job.reclaim_after is not None
            and not agent.reclaim_asked
            and now - (agent.running_since or now) >= job.reclaim_after
        ):
            agent.reclaim_asked = True
            try:
                answer = self.admin.reclaim(agent.instance_id, self.notice)
            except AdminError as exc:  # e.g. relaunched on demand: nothing to reclaim
                log(f"reclaim of {agent.instance_id} ({agent.job_id}) refused: {exc.detail}")
            else:
                self.reclaims.append(Reclaim(agent.job_id, agent.instance_id, float(answer["notice_at"])))
            return
        if now - (agent.running_since or now) >= agent.train_seconds:
            self._end(agent, self._succeeded, agent, now)
        elif not agent.busy and now - agent.beat_at >= self.heartbeat:
            agent.busy = True
            self._pool.submit(self._write, agent, "busy", self._training_beat, agent, now)

    def _training_beat(self, agent: Agent, now: float) -> None:
        with agent.lock:
            if not (agent.ending or agent.done):
                self._beat(agent, Phase.TRAINING, now, None)

    def _end(self, agent: Agent, write: Callable[..., None], *args: Any) -> None:
        agent.ending = True
        self._ending.submit(self._write, agent, "ending", self._locked, agent, write, *args)

    @staticmethod
    def _locked(agent: Agent, write: Callable[..., None], *args: Any) -> None:
        with agent.lock:
            write(*args)

    def _write(self, agent: Agent, flag: str, write: Callable[..., None], *args: Any) -> None:
        """``write(*args)``, then ``agent.<flag>`` cleared: a failed write is tried again by the next round."""
        try:
            write(*args)
        except Exception as exc:
            self.write_errors += 1
            if self.write_errors <= 5:
                log(f"agent write for {agent.job_id} failed: {exc!r}")
        finally:
            setattr(agent, flag, False)

    def _put(self, key: str, body: str) -> None:
        self._cos().put_object(Bucket=self.bucket, Key=key, Body=body.encode(), ContentType="application/json")
        self.writes += 1

    def _beat(self, agent: Agent, phase: Phase, now: float, notice_time: str | None, message: str = "") -> None:
        agent.seq += 1
        status = Status(attempt=agent.attempt, node_rank=agent.node, instance_id=agent.instance_id, phase=phase,
                        time=now, seq=agent.seq, step=agent.step(now), loss=1.0 / (1 + agent.step(now)),
                        notice_time=notice_time, message=message)
        self._put(JobLayout(agent.job_id).status(agent.attempt, agent.node), status.model_dump_json())
        agent.beat_at = now

    def _signal(self, agent: Agent, phase: Phase, now: float) -> None:
        """What a real agent's heartbeat puts once its status says the attempt ended (contract.SIGNALS_PREFIX)."""
        self._put(signal_for(JobLayout(agent.job_id).signal(agent.attempt, agent.node), phase),
                  json.dumps({"phase": phase.value, "time": now}))

    def _result(self, agent: Agent, outcome: Outcome, reason: str, now: float) -> None:
        result = Result(attempt=agent.attempt, node_rank=agent.node, instance_id=agent.instance_id, outcome=outcome,
                        exit_code=0 if outcome == Outcome.SUCCEEDED else None, reason=reason,
                        final_step=agent.step(now), time=now)
        self._put(JobLayout(agent.job_id).result(agent.attempt, agent.node), result.model_dump_json())
        agent.done = True

    def _succeeded(self, agent: Agent, now: float) -> None:
        self._beat(agent, Phase.DONE, now, None, "the training finished (simulated agent)")
        self._signal(agent, Phase.DONE, now)
        self._result(agent, Outcome.SUCCEEDED, "the training finished (simulated agent)", now)

    def _preempted(self, agent: Agent, view: dict[str, Any], now: float) -> None:
        why = f"spot reclaim notice: terminated at {view.get('termination_time')} (simulated agent)"
        self._beat(agent, Phase.PREEMPTED, now, view.get("termination_time"), why)
        self._signal(agent, Phase.PREEMPTED, now)
        self.signalled[(agent.job_id, agent.attempt)] = time.time()
        self._result(agent, Outcome.PREEMPTED, why, now)


# -- one side of the comparison ------------------------------------------------------------------------------------
@dataclass
class Side:
    name: str
    home: Path
    jobs: list[str] = field(default_factory=list)
    processes: list[Watched] = field(default_factory=list)
    started: float = 0.0  # the first submission
    ended: float = 0.0  # the last job's end (the run's deadline if some never ended)
    states: dict[str, str] = field(default_factory=dict)
    died: str = ""  # why the run is not to be trusted (a controller that exited early)
    emulator_cpu_s: float = 0.0  # over the side's run
    own_cpu_s: float = 0.0  # this process's (the agents, the submissions, the reading), over the side's run
    db: str = ""  # a shared store's URL (CVMJOB_DB); "" for the SQLite file in CVMJOB_HOME

    @property
    def peak_mb(self) -> float:
        return sum(p.peak_kib for p in self.processes) / 1024

    def env(self) -> dict[str, str]:
        return {**os.environ, "CVMJOB_HOME": str(self.home), **({"CVMJOB_DB": self.db} if self.db else {})}

    def store(self) -> Store:
        self.home.mkdir(parents=True, exist_ok=True)
        return Store(self.db or self.home / "state.db")  # the SQLite file that CVMJOB_HOME's store is, by default


def cvmjob(*args: str) -> list[str]:
    return [sys.executable, "-m", "orchestrator.cli.main", *args]


def submit_jobs(side: Side, report: api.PlanReport, count: int, rate: float, agents: Agents, first_train: float,
                reclaim_after: dict[int, float], deadline: float, alive: Callable[[], str],
                after_submit: Callable[[str], None] = lambda job_id: None) -> bool:
    """``count`` jobs through the library, no faster than ``rate`` a second, each told to the load generator
    before it can have an instance. False (and ``side.died`` set) when the side cannot go on."""
    store = side.store()
    side.started = next_at = time.time()
    for index in range(count):
        # Each after the one before by 1/rate at least: a schedule that caught up after a slow submission sent
        # bursts of twice the rate, which no budget can launch within seconds.
        wait = next_at - time.time()
        if wait > 0:
            time.sleep(wait)
        next_at = time.time() + 1 / rate
        why = alive() or (f"only {index} of {count} jobs submitted by the deadline" if time.time() > deadline else "")
        if why:
            side.died, side.ended = why, time.time()
            store.close()
            return False
        named = dataclasses.replace(report, spec=report.spec.model_copy(update={"name": f"scale-{index:04d}"}))
        job_id = api.submit(named, store)
        agents.add(JobPlan(job_id, first_train, reclaim_after.get(index)))
        side.jobs.append(job_id)
        after_submit(job_id)
    store.close()
    return True


def wait_for_jobs(side: Side, deadline: float, alive: Callable[[], str]) -> None:
    """Until every job of the side is terminal, sampling the processes' memory; ``alive`` says why the side
    cannot go on ("" while it can)."""
    store = side.store()
    try:
        while True:
            for process in side.processes:
                process.sample()
            records = {j.job_id: j for j in store.list_jobs()}
            side.states = {j: records[j].state.value for j in side.jobs if j in records}
            open_jobs = [j for j in side.jobs if j not in records or not records[j].state.is_terminal()]
            if not open_jobs:
                side.ended = max(records[j].entered_at for j in side.jobs)
                return
            why = alive()
            if why:
                side.died, side.ended = why, time.time()
                return
            if time.time() > deadline:
                side.died, side.ended = f"{len(open_jobs)} job(s) had not ended by the deadline", time.time()
                return
            time.sleep(STORE_POLL_SECONDS)
    finally:
        store.close()


class CpuWindow:
    """The emulator's and this process's CPU time over one side's run."""

    def __init__(self, side: Side, emulator: EmulatorProcess) -> None:
        self.side, self.pid = side, emulator.process.pid

    def __enter__(self) -> None:
        self.emulator, self.own = cpu_seconds(self.pid) or 0.0, time.process_time()

    def __exit__(self, *exc: object) -> None:
        self.side.emulator_cpu_s = (cpu_seconds(self.pid) or 0.0) - self.emulator
        self.side.own_cpu_s = time.process_time() - self.own


def run_controller(side: Side, args: argparse.Namespace, report: api.PlanReport, agents: Agents,
                   rng: random.Random, deadline: float) -> None:
    side.home.mkdir(parents=True, exist_ok=True)
    with (side.home / "controller.log").open("ab") as out:
        popen = subprocess.Popen(cvmjob("controller", "--max-jobs", str(args.jobs)), env=side.env(), cwd=REPO,
                                 stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    controller = Watched("controller", popen)
    side.processes.append(controller)

    def alive() -> str:
        if popen.poll() is None:
            return ""
        tail = (side.home / "controller.log").read_text(errors="replace")[-3000:]
        return f"the controller exited with {popen.returncode}:\n{tail}"

    sampler = threading.Event()

    def sample() -> None:  # the controller's memory while jobs are still being submitted
        while not sampler.wait(1.0):
            controller.sample()

    threading.Thread(target=sample, daemon=True).start()
    span = args.jobs / args.rate
    chosen = rng.sample(range(args.jobs), args.reclaims)
    reclaim_after = {i: rng.uniform(5.0, max(5.0, min(30.0, args.train_seconds / 2))) for i in chosen}
    try:
        # Jobs come to a controller that is up: its start (imports, the store) is not launch latency.
        ready = time.time() + 120
        while "driving up to" not in (side.home / "controller.log").read_text(errors="replace"):
            why = alive() or ("the controller did not start within 120 s" if time.time() > ready else "")
            if why:
                side.died, side.ended = why, time.time()
                return
            time.sleep(0.2)
        if submit_jobs(side, report, args.jobs, args.rate, agents, span + args.train_seconds, reclaim_after,
                       deadline, alive):
            log(f"{side.name}: {args.jobs} jobs submitted in {time.time() - side.started:.0f} s")
            wait_for_jobs(side, deadline, alive)
        controller.sample()
    finally:
        sampler.set()
        controller.stop()


def run_baseline(side: Side, args: argparse.Namespace, report: api.PlanReport, agents: Agents,
                 deadline: float) -> None:
    logs = side.home / "logs"
    logs.mkdir(parents=True, exist_ok=True)

    def spawn(job_id: str) -> None:  # what `run --detach` did: submit, then a driver process of its own
        with (logs / f"{job_id}.log").open("ab") as out:
            popen = subprocess.Popen(cvmjob("_drive", job_id), env=side.env(), cwd=REPO, stdout=out,
                                     stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        side.processes.append(Watched(job_id, popen))

    sampler = threading.Event()

    def sample() -> None:
        while not sampler.wait(1.0):
            for process in list(side.processes):
                process.sample()

    threading.Thread(target=sample, daemon=True).start()
    span = args.baseline_jobs / args.rate
    try:
        if submit_jobs(side, report, args.baseline_jobs, args.rate, agents, span + args.train_seconds, {},
                       deadline, lambda: "", spawn):
            wait_for_jobs(side, deadline, lambda: "")
    finally:
        sampler.set()
        for process in side.processes:
            process.stop(grace=5.0)


# -- numbers -------------------------------------------------------------------------------------------------------
def p95(values: list[float]) -> float:
    if not values:
        return math.nan
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=20, method="inclusive")[18]


@dataclass
class Numbers:
    jobs: int
    succeeded: int
    peak_mb: float
    describe_per_s: float
    describe_busiest: int
    throttled: int
    throttled_by_action: dict[str, int]
    launch: list[float]
    relaunch: list[float]  # a reclaimed job: RECOVERING -> the RunInstances of its next attempt
    detect: list[float]
    reaction: list[float]  # the simulated agents' part of detect: the notice -> their signal put
    seconds: float
    cpu_s: float
    emulator_cpu_s: float
    own_cpu_s: float

    @property
    def mb_per_job(self) -> float:
        return self.peak_mb / self.jobs if self.jobs else math.nan


def numbers(side: Side, calls: CallLog, agents: Agents, reclaims: list[Reclaim]) -> Numbers:
    window = calls.between(side.started, side.ended)
    seconds = max(side.ended - side.started, 1e-9)
    describes = [c["time"] for c in window if c["action"] == "DescribeInstances"]
    per_second: dict[int, int] = {}
    for at in describes:
        per_second[int(at)] = per_second.get(int(at), 0) + 1
    throttled: dict[str, int] = {}
    for c in window:
        if c["error"] == "RequestLimitExceeded":
            throttled[c["action"]] = throttled.get(c["action"], 0) + 1
    by_token = {a.client_token: a for a in agents.agents.values() if a.client_token}
    store = side.store()
    try:
        records = {j.job_id: j for j in store.list_jobs()}
        launch = [
            by_token[client_token(j, 1, 0)].created_at - records[j].created_at
            for j in side.jobs
            if j in records and client_token(j, 1, 0) in by_token
        ]
        detect, relaunch = [], []
        reaction = [agents.signalled[(r.job_id, 1)] - r.notice_at for r in reclaims
                    if (r.job_id, 1) in agents.signalled]
        for r in reclaims:
            if r.job_id not in records:
                continue
            entered = [e.at for e in store.events(r.job_id)
                       if e.kind == "transition" and e.to_state == JobState.RECOVERING.value and e.at >= r.notice_at]
            if entered:
                detect.append(entered[0] - r.notice_at)
                if client_token(r.job_id, 2, 0) in by_token:
                    relaunch.append(by_token[client_token(r.job_id, 2, 0)].created_at - entered[0])
    finally:
        store.close()
    return Numbers(
        jobs=len(side.jobs),
        succeeded=sum(1 for s in side.states.values() if s == JobState.SUCCEEDED.value),
        peak_mb=side.peak_mb,
        describe_per_s=len(describes) / seconds,
        describe_busiest=max(per_second.values(), default=0),
        throttled=sum(throttled.values()),
        throttled_by_action=throttled,
        launch=launch,
        relaunch=relaunch,
        detect=detect,
        reaction=reaction,
        seconds=seconds,
        cpu_s=sum(p.cpu_s for p in side.processes),
        emulator_cpu_s=side.emulator_cpu_s,
        own_cpu_s=side.own_cpu_s,
    )


def report_table(args: argparse.Namespace, ours: Numbers, base: Numbers | None, agents: Agents, calls: CallLog,
                 load: tuple[float, float, float], peak_training: int) -> None:
    print(
        f"controller scale on the emulator ({os.cpu_count()} CPUs, load average {load[0]:.1f} before, "
        f"{os.getloadavg()[0]:.1f} after; jobs arrive at {args.rate:g}/s; {args.reclaims} spot reclaims with a "
        f"{args.notice:.0f} s notice; attempt 1 trains {args.train_seconds:.0f} s plus the submission span)"
    )
    print(
        f"AGENTS ARE SIMULATED: the emulator's load mode boots instances without running anything; this process "
        f"wrote every agent's documents through the real COS API ({agents.writes} writes, {agents.write_errors} "
        f"failed; a heartbeat every {args.heartbeat:g} s). API limits: "
        + ", ".join(f"{k.split(':')[-1]} {v:g}/s" for k, v in RATE_LIMITS.items() if k != "*")
        + f", {RATE_LIMITS['*']:g}/s otherwise."
    )
    if calls.lost:
        print(f"warning: {calls.lost} calls dropped off the emulator's call log before they were read")
    print()

    def cell(value: float | None, fmt: str) -> str:
        return "-" if value is None or (isinstance(value, float) and math.isnan(value)) else format(value, fmt)

    def stat(values: list[float], what: Callable[[list[float]], float]) -> float | None:
        return what(values) if values else None

    median: Callable[[list[float]], float] = statistics.median
    rows: list[tuple[str, str, str]] = [
        ("jobs", str(ours.jobs), str(base.jobs) if base else "-"),
        ("jobs succeeded", str(ours.succeeded), str(base.succeeded) if base else "-"),
        ("peak jobs training at once (agents)", str(peak_training), "-"),
        ("peak RSS, MB (baseline: sum of its processes)", cell(ours.peak_mb, ".1f"),
         cell(base.peak_mb if base else None, ".1f")),
        ("MB per job", cell(ours.mb_per_job, ".3f"), cell(base.mb_per_job if base else None, ".3f")),
        ("DescribeInstances per s, mean", cell(ours.describe_per_s, ".2f"),
         cell(base.describe_per_s if base else None, ".2f")),
        ("DescribeInstances per s per job", cell(ours.describe_per_s / max(ours.jobs, 1), ".4f"),
         cell(base.describe_per_s / max(base.jobs, 1) if base else None, ".4f")),
        ("DescribeInstances in the busiest second", str(ours.describe_busiest),
         str(base.describe_busiest) if base else "-"),
        ("RequestLimitExceeded answers", str(ours.throttled), str(base.throttled) if base else "-"),
        ("launch: submitted -> RunInstances, median s", cell(stat(ours.launch, median), ".2f"),
         cell(stat(base.launch, median) if base else None, ".2f")),
        ("launch p95 s", cell(stat(ours.launch, p95), ".2f"), cell(stat(base.launch, p95) if base else None, ".2f")),
        ("launch max s", cell(stat(ours.launch, max), ".2f"), cell(stat(base.launch, max) if base else None, ".2f")),
        (f"relaunch: RECOVERING -> RunInstances, p95 s ({len(ours.relaunch)})", cell(stat(ours.relaunch, p95), ".2f"),
         "-"),
        (f"reclaim notice -> RECOVERING, median s ({len(ours.detect)})", cell(stat(ours.detect, median), ".2f"), "-"),
        ("reclaim notice -> RECOVERING, p95 s", cell(stat(ours.detect, p95), ".2f"), "-"),
        ("reclaim notice -> RECOVERING, max s", cell(stat(ours.detect, max), ".2f"), "-"),
        ("  of which the simulated agent (-> its signal), p95 s", cell(stat(ours.reaction, p95), ".2f"), "-"),
        ("first submission -> last job ended, s", cell(ours.seconds, ".0f"), cell(base.seconds if base else None,
                                                                                     ".0f")),
        ("CPU s: the controller (baseline: its processes)", cell(ours.cpu_s, ".1f"),
         cell(base.cpu_s if base else None, ".1f")),
        ("CPU s: the emulator", cell(ours.emulator_cpu_s, ".1f"), cell(base.emulator_cpu_s if base else None, ".1f")),
        ("CPU s: this process (simulated agents, submits)", cell(ours.own_cpu_s, ".1f"),
         cell(base.own_cpu_s if base else None, ".1f")),
    ]
    print(f"{'':<48} {'1 controller':>14} {'1 process/job':>14}")
    for label, a, b in rows:
        print(f"{label:<48} {a:>14} {b:>14}")
    for name, n in (("controller", ours), ("baseline", base)):
        if n is not None and n.throttled_by_action:
            print(f"throttled ({name}): " + ", ".join(f"{k} {v}" for k, v in sorted(n.throttled_by_action.items())))


# -- the run -------------------------------------------------------------------------------------------------------
def start_cloud(root: Path, args: argparse.Namespace) -> EmulatorProcess:
    # The state file at most every 10 s: with a thousand instances and their charges each write takes about 0.3 s
    # (once a second, it was a third of the emulator's CPU), and written after every change it would make the
    # emulator, not the controller, what the numbers measure. Nothing restarts this emulator.
    emulator = start_emulator(root / "state", "--no-user-data", "--gpus", "none", "--state-save-seconds", "10",
                              "--spot-notice-seconds", str(args.notice))
    admin = emulator.admin
    for key, per_second in RATE_LIMITS.items():
        admin.set_rate_limit(key, per_second)
    # Enough capacity for every job and relaunch in every zone (the default stock is 10 spot instances a type).
    wanted = args.jobs + args.baseline_jobs + args.reclaims + 10
    for zone in zones_of(REGION):
        if zone.name in INSTANCE_TYPES_BY_NAME[INSTANCE_TYPE].zones:
            for charge in ("SPOTPAID", "POSTPAID_BY_HOUR"):
                admin.set_stock(zone.name, INSTANCE_TYPE, charge, wanted)
    # A team that runs a thousand spot jobs has had its spot quota (50 vCPUs a zone by default) raised by ticket.
    admin.set_spot_quota(wanted * INSTANCE_TYPES_BY_NAME[INSTANCE_TYPE].cpu)
    return emulator


def start_load(emulator: EmulatorProcess, report: api.PlanReport,
               args: argparse.Namespace) -> tuple[CallLog, Agents]:
    """The emulator's call log, read as it grows, and the simulated agents of the planned job's bucket, running."""
    calls = CallLog(emulator.admin)
    calls.start()
    agents = Agents(emulator, report.plan.state_bucket, args.heartbeat, args.train_seconds, args.notice)
    agents.start()
    return calls, agents


class Stoppable(Protocol):
    def stop(self) -> None: ...


def clean_up(root: Path, keep: bool, *running: Stoppable | None) -> None:
    """Stop what runs, in order, then remove the run's folder (or say where it was kept)."""
    for thing in running:
        if thing is not None:
            thing.stop()
    if keep:
        log(f"kept {root}")
    else:
        shutil.rmtree(root, ignore_errors=True)


def planned_job(root: Path) -> api.PlanReport:
    """The benchmark's job, written under ``root`` and planned once (with a CVMJOB_HOME of its own there)."""
    job = root / "job"
    job.mkdir()
    (job / "job.yaml").write_text(SPEC.format(region=REGION, instance_type=INSTANCE_TYPE))
    (job / "train.py").write_text("raise SystemExit('never run: the agents are simulated')\n")
    os.environ["CVMJOB_HOME"] = str(root / "plan-home")
    return api.plan(job / "job.yaml")


def environment(emulator: EmulatorProcess) -> None:
    """This process's environment, inherited by the controller and the drivers: the emulator as the cloud, its root
    keys, no proxy, no other store."""
    for name in list(os.environ):
        if name.startswith(("CVMJOB_", "TENCENTCLOUD_")) or name.lower().endswith("_proxy"):
            del os.environ[name]
    os.environ.update(clean_env())
    os.environ.update(
        CVMJOB_ENDPOINT=emulator.endpoint,
        TENCENTCLOUD_SECRET_ID=emulator.secret_id,
        TENCENTCLOUD_SECRET_KEY=emulator.secret_key,
        PYTHONUNBUFFERED="1",
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=1000, help="jobs the one controller drives")
    parser.add_argument("--baseline-jobs", type=int, default=20, help="jobs of the one-process-per-job baseline")
    parser.add_argument("--reclaims", type=int, help="jobs whose spot instance is reclaimed (default 5 %% of --jobs)")
    parser.add_argument("--train-seconds", type=float, default=60.0, help="simulated training after the span")
    parser.add_argument("--heartbeat", type=float, default=5.0, help="seconds between a simulated agent's reports")
    parser.add_argument("--notice", type=float, default=120.0, help="seconds of notice of a reclaim")
    parser.add_argument("--rate", type=float, default=8.0, help="jobs submitted per second at most")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--timeout", type=float, help="the whole run's deadline in s (default: from the sizes)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory (logs, stores)")
    args = parser.parse_args()
    if args.reclaims is None:
        args.reclaims = max(1, round(args.jobs * 0.05))
    if args.jobs < 1 or not 0 <= args.reclaims <= args.jobs or args.baseline_jobs < 0 or args.rate <= 0:
        parser.error("need --jobs >= 1, 0 <= --reclaims <= --jobs, --baseline-jobs >= 0, --rate > 0")
    logging.getLogger("qcloud_cos").setLevel(logging.WARNING)
    rng = random.Random(args.seed)
    load = os.getloadavg()  # other work on the machine slows everything: say how busy it was
    sizes = args.jobs + args.baseline_jobs
    timeout = args.timeout or 300 + 2 * (sizes / args.rate + args.train_seconds) + sizes / 4
    deadline = time.time() + timeout
    scratch = tempfile.mkdtemp(prefix="controller-scale-")
    root = Path(scratch)
    emulator: EmulatorProcess | None = None
    agents: Agents | None = None
    calls: CallLog | None = None
    try:
        emulator = start_cloud(root, args)
        environment(emulator)
        report = planned_job(root)
        calls, agents = start_load(emulator, report, args)
        log(f"controller: {args.jobs} jobs, {args.reclaims} reclaims (agents are simulated)")
        ours = Side("controller", root / "controller-home")
        with CpuWindow(ours, emulator):
            run_controller(ours, args, report, agents, rng, deadline)
        reclaims, peak_training = list(agents.reclaims), agents.peak_training
        base: Side | None = None
        if args.baseline_jobs and not ours.died:
            log(f"baseline: {args.baseline_jobs} jobs, a process each")
            base = Side("baseline", root / "baseline-home")
            with CpuWindow(base, emulator):
                run_baseline(base, args, report, agents, deadline)
        calls.stop()
        ours_n = numbers(ours, calls, agents, reclaims)
        base_n = numbers(base, calls, agents, []) if base is not None else None
        report_table(args, ours_n, base_n, agents, calls, load, peak_training)
        problems = [f"{s.name}: {s.died}" for s in (ours, base) if s is not None and s.died]
        problems += [
            f"{s.name}: {n.jobs - n.succeeded} of {n.jobs} job(s) did not succeed "
            f"({', '.join(sorted(set(v for v in s.states.values() if v != JobState.SUCCEEDED.value)))})"
            for s, n in ((ours, ours_n), (base, base_n))
            if s is not None and n is not None and n.succeeded < n.jobs
        ]
        for problem in problems:
            print(f"FAILED: {problem}", file=sys.stderr)
        print(
            f"controller_scale: jobs={ours_n.jobs} rss_mb={ours_n.peak_mb:.1f} mb_per_job={ours_n.mb_per_job:.3f} "
            f"describe_per_s={ours_n.describe_per_s:.2f} throttled={ours_n.throttled} "
            f"reclaim_detect_p95_s={p95(ours_n.detect):.2f} launch_p95_s={p95(ours_n.launch):.2f}",
            flush=True,
        )
        return 1 if problems else 0
    finally:
        clean_up(root, args.keep, agents, calls, emulator)


if __name__ == "__main__":
    sys.exit(main())
