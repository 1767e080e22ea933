"""The fault suite's harness: scenarios run concurrently, each on an emulator of its own, through the real CLI.

A *scenario* is a function of a ``World``: it starts ``cvmjob`` processes against its lane's emulator (a real
server process, the real SDKs, instances as local processes running the real agent), injects faults through the
emulator's admin API, and waits. After it returns, the common invariants (``invariants.py``) are checked once the
system is quiet. Every scenario's injections and checks are recorded for docs/reliability.md.

Scenarios are registered with ``@scenario`` and run by a ``Pool``: ``CVMJOB_FAULT_LANES`` emulators (default 6),
each running one scenario at a time, the longest first. A pytest test per scenario waits for its result, so a
failure names its scenario and ``-k`` selects scenarios; the pool starts only the collected ones.
"""

from __future__ import annotations

import json
import secrets
import signal
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable
from concurrent.futures import Future
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orchestrator.api import checkpoint_manifest
from orchestrator.contract import JobLayout, Manifest
from orchestrator.emulator.client import AdminClient
from orchestrator.emulator.config import DEFAULT_SECRET_ID
from orchestrator.providers.tencent import StaticCredential, TencentSdk
from orchestrator.providers.tencent.storage import ObjectStore
from orchestrator.state.store import JobRecord, Store
from tests.emulator_process import EmulatorProcess, clean_env, start_emulator
from tests.postgres import fresh_database
from tests.waiting import wait_until

REPO = Path(__file__).resolve().parents[2]
JOB = Path(__file__).resolve().parent / "job" / "job.yaml"
STATE_BUCKET = "cvmjob-ap-guangzhou-1250000000"
REGION = "ap-guangzhou"
ZONE = "ap-guangzhou-3"
TYPE = "S5.MEDIUM4"
# From `resume` to the training's first steps: launch, boot, setup, and a preflight that imports torch. Six lanes
# on a loaded two-core CI runner (the PostgreSQL pass) took over 60 s for the preflight alone; a passing scenario
# never waits this long, so it is an upper bound only, and the default of every wait for a state or a phase.
BOOTED_WITHIN = 240.0


@dataclass
class Record:
    """What docs/reliability.md says about one scenario."""

    name: str
    group: str
    doc: str
    injected: list[str] = field(default_factory=list)
    checked: list[str] = field(default_factory=list)
    outcome: str = "not run"
    detail: str = ""
    seconds: float = 0.0
    end_states: list[str] = field(default_factory=list)


class World:
    """One scenario's view: its emulator (lane), its CVMJOB_HOME, CLI processes, the store, faults."""

    def __init__(self, emulator: EmulatorProcess, home: Path, record: Record, store_url: str | None = None) -> None:
        """``store_url``: a PostgreSQL database for the state store; None: the SQLite file in CVMJOB_HOME."""
        self.emulator = emulator
        self.home = home
        self.record = record
        self.store_url = store_url or str(home / "state.db")
        self.processes: list[subprocess.Popen[bytes]] = []
        self._held: dict[str, subprocess.Popen[bytes]] = {}
        home.mkdir(parents=True, exist_ok=True)

    # -- the CLI -------------------------------------------------------------------------------------------
    def env(self, **extra: str) -> dict[str, str]:
        env = clean_env()
        env.update(
            HOME=str(self.home),  # no ~/.tencentcloud of the machine's user
            CVMJOB_HOME=str(self.home),
            CVMJOB_DB=self.store_url,
            CVMJOB_ENDPOINT=self.emulator.endpoint,
            TENCENTCLOUD_SECRET_ID=self.emulator.secret_id,
            TENCENTCLOUD_SECRET_KEY=self.emulator.secret_key,
            PYTHONUNBUFFERED="1",
        )
        env.update(extra)
        return env

    @staticmethod
    def argv(*args: str) -> list[str]:
        return [sys.executable, "-m", "orchestrator.cli.main", *args]

    def cli(self, *args: str, timeout: float = 120, **env: str) -> subprocess.CompletedProcess[str]:
        """A CLI command run to its end."""
        return subprocess.run(
            self.argv(*args), env=self.env(**env), capture_output=True, text=True, timeout=timeout, cwd=REPO,
            check=False,
        )

    def start(self, *args: str, **env: str) -> subprocess.Popen[bytes]:
        """A CLI process in the background; output to ``<home>/cli-<n>.log``."""
        log_path = self.home / f"cli-{len(self.processes)}.log"
        with log_path.open("ab") as log:
            process = subprocess.Popen(
                self.argv(*args), env=self.env(**env), stdout=log, stderr=subprocess.STDOUT, cwd=REPO
            )
        self.processes.append(process)
        return process

    def run(self, *overrides: str, **env: str) -> subprocess.Popen[bytes]:
        """``cvmjob run`` of the fault job with ``--set`` overrides, in the background."""
        sets = [a for o in overrides for a in ("--set", o)]
        return self.start("run", str(JOB), *sets, **env)

    def submit(self, *overrides: str) -> str:
        """Plan and submit the fault job (tests/faults/submit.py) without driving it; its id. The submitting
        process then waits to become the job's first `cvmjob resume` (see resume)."""
        sets = [a for o in overrides for a in ("--set", o)]
        id_file = self.home / f"job-{len(self.processes)}.id"
        log_path = self.home / f"cli-{len(self.processes)}.log"
        with log_path.open("ab") as log:
            process = subprocess.Popen(
                [sys.executable, "-m", "tests.faults.submit", str(JOB), *sets, "--id-file", str(id_file)],
                env=self.env(), stdin=subprocess.PIPE, stdout=log, stderr=subprocess.STDOUT, cwd=REPO,
            )
        self.processes.append(process)
        self.wait(lambda: id_file.exists() or process.poll() is not None, 120, "the submission", every=0.05)
        assert id_file.exists(), f"the submission failed:\n{log_path.read_text(errors='replace')[-3000:]}"
        job_id = id_file.read_text()
        self._held[job_id] = process
        return job_id

    def resume(self, job_id: str, *args: str, **env: str) -> subprocess.Popen[bytes]:
        """`cvmjob resume JOB`; the first one of a submitted job is its waiting submission process (it sets only
        CVMJOB_CRASH_AT of ``env``)."""
        held = self._held.pop(job_id, None)
        if held is not None and not args and set(env) <= {"CVMJOB_CRASH_AT"}:
            assert held.stdin is not None
            held.stdin.write(f"go {env.get('CVMJOB_CRASH_AT', '')}\n".encode())
            held.stdin.close()
            return held
        if held is not None:
            held.stdin.close()  # type: ignore[union-attr]
            held.wait()
        return self.start("resume", job_id, *args, **env)

    def output(self) -> str:
        return "".join(p.read_text(errors="replace") for p in sorted(self.home.glob("cli-*.log")))

    def pause(self, process: subprocess.Popen[bytes], timeout: float = 60) -> None:
        """SIGSTOP ``process`` at a moment it holds no write lock on a SQLite store. A controller stopped inside a
        write transaction would block every other process's writes until it wakes (SQLite locks the whole file), a
        different fault from the paused controller a scenario means (the baseline's fencing run failed so)."""
        deadline = time.monotonic() + timeout
        while True:
            process.send_signal(signal.SIGSTOP)
            if not self._store_write_locked():
                return
            process.send_signal(signal.SIGCONT)
            if time.monotonic() > deadline:
                raise AssertionError(f"{self.record.name}: the store stayed locked for {timeout:.0f} s")
            time.sleep(0.05)  # let it finish its transaction, then stop it again

    def _store_write_locked(self) -> bool:
        if "://" in self.store_url:  # PostgreSQL locks rows, not the store
            return False
        import sqlite3

        connection = sqlite3.connect(self.store_url, timeout=0, isolation_level=None)
        try:
            connection.execute("BEGIN IMMEDIATE")
            connection.execute("ROLLBACK")
            return False
        except sqlite3.OperationalError:
            return True
        finally:
            connection.close()

    def stop_processes(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                process.kill()
            process.wait()
            if process.stdin is not None:
                process.stdin.close()

    # -- the store -----------------------------------------------------------------------------------------
    def store(self) -> Store:
        return Store(self.store_url)

    def jobs(self) -> list[JobRecord]:
        if self.store_url == str(self.home / "state.db") and not (self.home / "state.db").exists():
            return []
        store = self.store()
        try:
            return store.list_jobs()
        finally:
            store.close()

    def job(self, job_id: str) -> JobRecord:
        record = self.store().get(job_id)
        assert record is not None, job_id
        return record

    def wait_for_job(self, timeout: float = 60) -> str:
        """The id of this world's (first) job, once submitted."""
        job_id: str = self.wait(lambda: next((j.job_id for j in reversed(self.jobs())), None), timeout, "a job")
        return job_id

    def wait(self, probe: Callable[[], Any], timeout: float, what: str, every: float = 0.2) -> Any:
        try:
            return wait_until(what, probe, timeout, every)
        except AssertionError as exc:
            raise AssertionError(f"{self.record.name}: {exc}\n{self.describe()}") from None

    def wait_state(self, job_id: str, *states: str, timeout: float = BOOTED_WITHIN) -> JobRecord:
        def probe() -> JobRecord | None:
            job = self.job(job_id)
            return job if job.state.value in states else None

        result: JobRecord = self.wait(probe, timeout, f"{job_id} in {'/'.join(states)}")
        return result

    def wait_terminal(self, job_id: str, timeout: float = 180) -> JobRecord:
        result: JobRecord = self.wait(
            lambda: (j := self.job(job_id)).state.is_terminal() and j, timeout, f"{job_id} terminal"
        )
        return result

    def node_instance(self, job_id: str, attempt: int | None = None, timeout: float = 60) -> str:
        """The instance id of node 0 of the job's (current, or given) attempt, once recorded."""

        def probe() -> str | None:
            job = self.job(job_id)
            nodes = self.store().nodes(job_id, attempt or job.attempt)
            return nodes[0].instance_id if nodes and nodes[0].instance_id else None

        result: str = self.wait(probe, timeout, f"an instance of {job_id}")
        return result

    def agent_phase(self, job_id: str, attempt: int | None = None) -> dict[str, Any] | None:
        data = self.get_object(JobLayout(job_id).status(attempt or self.job(job_id).attempt, 0))
        return json.loads(data) if data else None

    def wait_phase(self, job_id: str, phase: str, timeout: float = BOOTED_WITHIN, min_step: int = -1) -> dict[str, Any]:
        def probe() -> dict[str, Any] | None:
            status = self.agent_phase(job_id)
            ok = status and status["phase"] == phase and (status.get("step") or 0) >= min_step
            return status if ok else None

        result: dict[str, Any] = self.wait(probe, timeout, f"{job_id} agent phase {phase}", every=0.3)
        return result

    def describe(self) -> str:
        lines = []
        for job in self.jobs():
            lines.append(f"{job.job_id}: {job.state.value} (outcome {job.outcome}) {job.reason}")
            lines += [f"  {e.from_state}->{e.to_state} {e.kind}: {e.detail}" for e in self.store().events(job.job_id)]
        return "\n".join([*lines, "--- cli output (tail) ---", self.output()[-3000:]])

    # -- the cloud -----------------------------------------------------------------------------------------
    @property
    def admin(self) -> AdminClient:
        return self.emulator.admin

    def inject(self, kind: str, **spec: Any) -> None:
        self.admin.inject(kind, **spec)
        self.record.injected.append(f"API {kind} " + ", ".join(f"{k}={v}" for k, v in spec.items()))

    def inject_cos(self, kind: str, **spec: Any) -> None:
        self.admin.inject_cos(kind, **spec)
        self.record.injected.append(f"COS {kind} " + ", ".join(f"{k}={v}" for k, v in spec.items()))

    def note(self, injected: str) -> None:
        self.record.injected.append(injected)

    def clear_faults(self) -> None:
        self.admin.clear_faults()

    def cos(self) -> Any:
        from tests.emulator.conftest import make_cos

        return make_cos(self.emulator)

    def cvm(self) -> Any:
        from tencentcloud.common import credential
        from tencentcloud.cvm.v20170312 import cvm_client

        from tests.emulator.conftest import profile

        return cvm_client.CvmClient(
            credential.Credential(self.emulator.secret_id, self.emulator.secret_key), REGION, profile(self.emulator)
        )

    def get_object(self, key: str, bucket: str = STATE_BUCKET) -> bytes | None:
        from qcloud_cos.cos_exception import CosServiceError

        try:
            return bytes(self.cos().get_object(Bucket=bucket, Key=key)["Body"].get_raw_stream().read())
        except CosServiceError as exc:
            if exc.get_status_code() == 404:
                return None
            raise

    def keys(self, prefix: str, bucket: str = STATE_BUCKET) -> list[str]:
        from qcloud_cos.cos_exception import CosServiceError

        client, keys, marker = self.cos(), [], ""
        while True:
            try:
                page = client.list_objects(Bucket=bucket, Prefix=prefix, Marker=marker, MaxKeys=1000)
            except CosServiceError as exc:
                if exc.get_error_code() == "NoSuchBucket":
                    return []
                raise
            keys += [c["Key"] for c in page.get("Contents", [])]
            if page.get("IsTruncated") != "true":
                return keys
            marker = page["NextMarker"]

    def state(self, bucket: str = STATE_BUCKET) -> ObjectStore:
        """The bucket as the product reads it."""
        sdk = TencentSdk(StaticCredential(self.emulator.secret_id, self.emulator.secret_key), REGION,
                         self.emulator.endpoint, self.emulator.appid)
        return ObjectStore(sdk, bucket)

    def manifest(self, job_id: str) -> Manifest | None:
        """The job's checkpoint manifest, read where and as `cvmjob status` reads it."""
        return checkpoint_manifest(self.job(job_id), self.state().sdk)

    def log_text(self, job_id: str, attempt: int, node: int = 0) -> str:
        chunks = sorted(self.keys(JobLayout(job_id).logs_prefix(attempt, node)))
        return "".join((self.get_object(k) or b"").decode(errors="replace") for k in chunks)

    def instances(self, job_id: str | None = None) -> list[dict[str, Any]]:
        """The emulator's instances (live ones with tags), optionally those of one job."""
        every = self.admin.instances()
        return [i for i in every if job_id is None or i.get("tags", {}).get("cvmjob:job") == job_id]

    def live_instances(self, job_id: str | None = None) -> list[dict[str, Any]]:
        return [i for i in self.instances(job_id) if i["state"] not in ("TERMINATED", "LAUNCH_FAILED")]


# -- I2: a sampler of live instances ----------------------------------------------------------------------------


class InstanceSampler:
    """Samples the emulator's instances while a scenario runs: every instance ever seen with its
    (job, attempt, node) tags, and every moment two live instances shared such a key (I2)."""

    def __init__(self, admin: AdminClient, period: float = 0.5) -> None:
        self.admin = admin
        self.period = period
        self.keys: dict[str, tuple[str, str, str]] = {}
        self.duplicates: list[str] = []
        self.errors = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="instance-sampler", daemon=True)

    def start(self) -> InstanceSampler:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        self.sample()

    def _loop(self) -> None:
        while not self._stop.wait(self.period):
            self.sample()

    def sample(self) -> None:
        try:
            every = self.admin.instances(processes=False)  # states and tags: no pass over /proc
        except Exception:  # the emulator being busy is no violation; the final sample must succeed
            self.errors += 1
            return
        live: dict[tuple[str, str, str], list[str]] = {}
        for inst in every:
            tags = inst.get("tags")
            if tags is None:  # gone: only its id is left
                continue
            key = (tags.get("cvmjob:job", ""), tags.get("cvmjob:attempt", ""), tags.get("cvmjob:node", ""))
            self.keys.setdefault(inst["instance_id"], key)
            if inst["state"] not in ("TERMINATED", "LAUNCH_FAILED"):
                live.setdefault(key, []).append(inst["instance_id"])
        for key, ids in live.items():
            if len(ids) > 1:
                self.duplicates.append(f"{key}: {ids} live at once")


# -- scenarios and the pool ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Scenario:
    name: str
    group: str
    run: Callable[[World], None]
    cost: float  # expected seconds on an idle lane: longest first
    doc: str
    checks: tuple[str, ...]  # common invariants to check after it (see invariants.check_quiet)
    on_postgres: bool  # run again on a PostgreSQL store: the store is part of its subject


SCENARIOS: dict[str, Scenario] = {}


def scenario(
    name: str,
    group: str,
    cost: float = 20.0,
    checks: tuple[str, ...] = ("I1", "I2", "I4", "I5", "secret"),
    on_postgres: bool = False,
) -> Callable[[Callable[[World], None]], Callable[[World], None]]:
    """``on_postgres``: the scenario's subject includes the store (what a killed controller leaves, a lease two
    controllers contend for, fifty jobs written at once), so it runs on SQLite and again on PostgreSQL."""

    def register(fn: Callable[[World], None]) -> Callable[[World], None]:
        assert name not in SCENARIOS, name
        doc = " ".join((fn.__doc__ or "").split())
        SCENARIOS[name] = Scenario(name, group, fn, cost, doc, checks, on_postgres)
        return fn

    return register


# A run of a scenario on a PostgreSQL store of its own is named after the scenario with this suffix; a plain name
# runs on the SQLite file in its CVMJOB_HOME.
ON_POSTGRES = "-on-postgres"


def names(group: str) -> list[str]:
    """The runs of a group's scenarios: each on SQLite, and those marked ``on_postgres`` on PostgreSQL too."""
    of_group = [s for s in SCENARIOS.values() if s.group == group]
    return [*(s.name for s in of_group), *(s.name + ON_POSTGRES for s in of_group if s.on_postgres)]


def scenario_of(run: str) -> Scenario:
    return SCENARIOS[run.removesuffix(ON_POSTGRES)]


@dataclass
class Lane:
    emulator: EmulatorProcess


class Pool:
    """Runs the wanted runs of scenarios (``names``) on ``lanes`` emulators, longest first; ``result(name)`` waits
    for one."""

    def __init__(self, root: Path, wanted: list[str], lanes: int, postgres_url: str | None = None) -> None:
        """``postgres_url``: the cluster whose fresh databases the runs named ``<scenario>-on-postgres`` use."""
        self.root = root
        self.postgres_url = postgres_url
        self.records: dict[str, Record] = {}
        self.futures: dict[str, Future[Record]] = {n: Future() for n in wanted}
        self._queue = sorted(wanted, key=lambda n: -scenario_of(n).cost)
        self._lock = threading.Lock()
        self._lanes: list[Lane] = []
        self._threads: list[threading.Thread] = []
        self.started_at = time.monotonic()
        for index in range(min(lanes, len(wanted))):
            secret = "fault" + secrets.token_hex(16)
            server = start_emulator(root / f"lane{index}" / "state", secret_key=secret)
            server.secret_key, server.secret_id = secret, DEFAULT_SECRET_ID
            self._lanes.append(Lane(server))
        for lane in self._lanes:
            thread = threading.Thread(target=self._work, args=(lane,), name=f"lane-{lane.emulator.port}", daemon=True)
            thread.start()
            self._threads.append(thread)

    def _next(self) -> str | None:
        with self._lock:
            return self._queue.pop(0) if self._queue else None

    def _work(self, lane: Lane) -> None:
        while (name := self._next()) is not None:
            if not name.endswith(ON_POSTGRES):
                record = run_scenario(scenario_of(name), lane.emulator, self.root / name, name=name)
            else:
                assert self.postgres_url is not None, f"{name}: the pool has no PostgreSQL cluster"
                with fresh_database(self.postgres_url) as url:
                    record = run_scenario(scenario_of(name), lane.emulator, self.root / name, url, name=name)
            self.records[name] = record
            self.futures[name].set_result(record)

    def result(self, name: str, timeout: float = 560) -> Record:
        return self.futures[name].result(timeout=timeout)

    def close(self) -> None:
        with self._lock:
            self._queue.clear()
        for thread in self._threads:
            thread.join(timeout=600)
        for lane in self._lanes:
            lane.emulator.stop()


def run_scenario(sc: Scenario, emulator: EmulatorProcess, home: Path, store_url: str | None = None,
                 name: str | None = None) -> Record:
    """One run of ``sc``, recorded as ``name`` (default: the scenario's)."""
    from tests.faults import invariants

    record = Record(name or sc.name, sc.group, sc.doc)
    started = time.monotonic()
    emulator.admin.reset(seed=sum(sc.name.encode()))
    world = World(emulator, home, record, store_url)
    sampler = InstanceSampler(emulator.admin).start()
    try:
        sc.run(world)
        sampler.stop()
        invariants.check_quiet(world, sampler, sc.checks)
        record.outcome = "passed"
    except BaseException as exc:
        sampler.stop()
        record.outcome = "FAILED"
        record.detail = "".join(traceback.format_exception(exc))[-6000:]
    finally:
        world.stop_processes()
        with suppress(Exception):
            emulator.admin.clear_faults()
        record.end_states = [f"{j.job_id}: {j.state.value}" for j in world.jobs()]
        record.seconds = time.monotonic() - started
    return record


def kill(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGKILL)
    process.wait()


