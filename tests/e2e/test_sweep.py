"""Sweeps through the CLI (issue 11): `cvmjob sweep run` over the quickstart on spot, with reclaims injected into
running trials; pruning, the budget and the brakes; a sweep killed mid-run and run again (SQLite and PostgreSQL).

Every sweep here runs against the e2e emulator with the real agent: the trials are real jobs."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from orchestrator.contract.tags import TAG_ATTEMPT, TAG_JOB
from tests.e2e.conftest import Cli
from tests.e2e.spot_support import GONE, JobWatch, job_folder, nothing_left, start_steps, steps_in, tiny_command
from tests.receiver import Receiver
from tests.waiting import wait_until

pytestmark = pytest.mark.e2e

# A training whose reported val_loss is its --quality plus a falling term: the worse quality is clearly worse at
# every step (for the pruner), and it needs no data and no torch.
METRIC = """
import argparse, time
from orchestrator import trainkit

p = argparse.ArgumentParser()
p.add_argument("--quality", type=float, required=True)
p.add_argument("--steps", type=int, default=30)
p.add_argument("--pace", type=float, default=0.3)
p.add_argument("--fail", action="store_true")
a = p.parse_args()
if a.fail:
    raise SystemExit("this training always fails")
for step in range(a.steps):
    time.sleep(a.pace)
    print(f"step={step} loss={1 / (step + 1):.4f}", flush=True)
    trainkit.report(step, 1 / (step + 1), val_loss=a.quality + 1 / (step + 1))
trainkit.finish()
"""


class Sweep:
    """A sweep folder (the quickstart job, paced.py, metric.py and sweep.yaml) and its `sweep run` process."""

    def __init__(self, cli: Cli, root: Path, spec: dict[str, Any]) -> None:
        self.cli = cli
        job = job_folder(root)
        (job.parent / "metric.py").write_text(METRIC)
        self.path = root / "sweep.yaml"
        self.path.write_text(yaml.safe_dump({"job": "job/job.yaml", **spec}))
        self.study = spec["study"]
        self.out, self.err = root / "sweep.out", root / "sweep.err"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with self.out.open("wb") as out, self.err.open("ab") as err:
            self.process = subprocess.Popen(self.cli.argv("sweep", "run", str(self.path), "--output", "json"),
                                            env=self.cli.env(), stdout=out, stderr=err, cwd=self.cli.home.parent)

    def finish(self, timeout: float = 600) -> tuple[int, dict[str, Any]]:
        assert self.process is not None
        try:
            code = self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            raise AssertionError(f"the sweep did not end in {timeout:.0f} s:\n{self.log()[-4000:]}") from None
        text = self.out.read_text()
        assert text.strip(), f"no JSON (exit {code}):\n{self.log()[-4000:]}"
        view: dict[str, Any] = json.loads(text)
        return code, view

    def run(self, timeout: float = 600) -> tuple[int, dict[str, Any]]:
        self.start()
        return self.finish(timeout)

    def log(self) -> str:
        return self.err.read_text(errors="replace")

    def status(self) -> dict[str, Any]:
        result = self.cli.run("sweep", "status", self.study, "--output", "json", timeout=60)
        assert result.returncode == 0, result.stderr
        view: dict[str, Any] = json.loads(result.stdout)
        return view


@pytest.fixture
def sweeps(cli: Cli, tmp_path: Path) -> Iterator[list[Sweep]]:
    made: list[Sweep] = []
    yield made
    for sweep in made:
        if sweep.process is not None and sweep.process.poll() is None:
            sweep.process.kill()
            sweep.process.wait()


def make(sweeps: list[Sweep], cli: Cli, root: Path, spec: dict[str, Any]) -> Sweep:
    root.mkdir(parents=True, exist_ok=True)
    sweep = Sweep(cli, root, spec)
    sweeps.append(sweep)
    return sweep


def metric_command(extra: str = "") -> str:
    # As it is, not under torchrun: the sweeps are about trials, not DDP (no torch to import, twice, per trial).
    return f"exec python3 metric.py --quality {{q}} {extra}".strip()


def metric_sweep(study: str, flags: str, **fields: Any) -> dict[str, Any]:
    """A sweep of metric.py over q in [1, 2] (no snapshot), with ``fields`` on top."""
    return {
        "study": study,
        "space": {"q": {"low": 1.0, "high": 2.0}},
        "set": {"snapshot.enabled": False, "train.command": metric_command(flags)},
        "objective": {"metric": "val_loss"},
        **fields,
    }


def status_doc(cli: Cli, job_id: str, attempt: int) -> dict[str, Any] | None:
    return JobWatch(cli.emulator, job_id).status(attempt)


def shipped_log(cli: Cli, job_id: str, attempt: int) -> str:
    result = cli.run("logs", job_id, "--attempt", str(attempt), timeout=60)
    assert result.returncode == 0, result.stderr
    return result.stdout


def ledger_cny(cli: Cli) -> float:
    fen: int = sum(line["cost_fen"] for line in cli.emulator.admin.billing()["ledger"])
    return fen / 100


def test_a_spot_sweep_resumes_its_reclaimed_trials_and_bills_what_the_ledger_says(
        cli: Cli, tmp_path: Path, sweeps: list[Sweep]) -> None:
    sweep = make(sweeps, cli, tmp_path / "main", {
        "study": "e2e-main",
        "space": {"lr": {"low": 0.0005, "high": 0.02, "log": True}, "hidden": {"low": 64, "high": 256, "step": 64}},
        "set": {"billing.mode": "spot", "snapshot.enabled": False, "checkpoints.interval_steps": 10,
                # tiny.py: checkpoints, SIGUSR1 and val_loss without torch; the space shapes val_loss and payload.
                "train.command": tiny_command(150, 0.1, 10, "--eval-every 25 --val-offset {lr} --payload {hidden}")},
        "objective": {"metric": "val_loss", "direction": "minimize"},
        "sampler": {"type": "tpe", "seed": 3, "startup_trials": 4},
        "pruner": {"type": "none"},
        "trials": 12, "parallel": 3,
    })
    reclaimed: list[str] = []
    stop = threading.Event()

    def reclaim_three() -> None:
        """A 15 s notice to the first three trials seen training past step 10 on their first attempt."""
        while not stop.is_set() and len(reclaimed) < 3:
            for instance in cli.emulator.admin.instances(processes=False):
                job_id = instance.get("tags", {}).get(TAG_JOB)
                if (instance["state"] != "RUNNING" or job_id is None or job_id in reclaimed
                        or instance["tags"].get(TAG_ATTEMPT) != "1"):
                    continue
                status = status_doc(cli, job_id, 1)
                if status and status.get("phase") == "training" and (status.get("step") or 0) >= 10:
                    cli.emulator.admin.reclaim(instance["instance_id"], notice_seconds=15)
                    reclaimed.append(job_id)
            stop.wait(0.5)

    injector = threading.Thread(target=reclaim_three, daemon=True)
    sweep.start()
    injector.start()
    try:
        code, view = sweep.finish(timeout=900)
    finally:
        stop.set()
        injector.join(10)
    assert code == 0, sweep.log()[-4000:]
    assert len(view["trials"]) == 12 and len({t["number"] for t in view["trials"]}) == 12
    assert {t["state"] for t in view["trials"]} <= {"COMPLETE", "PRUNED"}, view["trials"]
    assert len(reclaimed) == 3
    by_job = {t["job_id"]: t for t in view["trials"]}
    for job_id in reclaimed:
        trial = by_job[job_id]  # the same trial, the same job, one attempt more: no retry used
        assert trial["state"] == "COMPLETE" and trial["attempts"] == 2 and trial["retries"] == 0, trial
        assert len(trial["preemptions"]) == 1, trial
        first, second = shipped_log(cli, job_id, 1), shipped_log(cli, job_id, 2)
        resumed_at = start_steps(second)[0]
        assert resumed_at > 0, second[-2000:]  # from its checkpoint, not from scratch
        assert steps_in(second)[0] == resumed_at and steps_in(second)[-1] == 149
        assert max(steps_in(first)) >= resumed_at - 1
    done = [t for t in view["trials"] if t["state"] == "COMPLETE"]
    best = min(done, key=lambda t: t["value"])
    assert view["best"]["number"] == best["number"] and view["best"]["value"] == best["value"]
    wait_until("every instance gone", lambda: nothing_left(cli.emulator), 60)
    assert abs(view["cost"] - ledger_cny(cli)) < 0.005, (view["cost"], ledger_cny(cli))
    report = cli.run("sweep", "report", "e2e-main", "--out", str(tmp_path / "report.html"), timeout=120)
    assert report.returncode == 0, report.stderr
    assert (tmp_path / "report.html").stat().st_size > 100_000 and (tmp_path / "report.png").exists()


def test_a_clearly_worse_trial_is_pruned_and_its_instance_goes_soon_after(
        cli: Cli, tmp_path: Path, sweeps: list[Sweep]) -> None:
    gone_at: dict[str, float] = {}
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            for instance in cli.emulator.admin.instances(processes=False):
                if instance["state"] in GONE:
                    gone_at.setdefault(instance["instance_id"], time.time())
            stop.wait(0.2)

    # RandomSampler(seed=6) draws q = 1, 1, 10, 1: two good trials complete, then the bad one meets the pruner.
    sweep = make(sweeps, cli, tmp_path / "prune", {
        "study": "e2e-prune",
        "space": {"q": {"choices": [1.0, 10.0]}},
        "set": {"snapshot.enabled": False, "train.command": metric_command("--steps 40")},
        "objective": {"metric": "val_loss"},
        "sampler": {"type": "random", "seed": 6},
        "pruner": {"type": "median", "startup_trials": 2, "warmup_steps": 3},
        "trials": 4, "parallel": 1,
    })
    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        code, view = sweep.run()
    finally:
        stop.set()
        watcher.join(5)
    assert code == 0, sweep.log()[-3000:]
    states = [(t["params"]["q"], t["state"]) for t in sorted(view["trials"], key=lambda t: t["number"])]
    assert states == [(1.0, "COMPLETE"), (1.0, "COMPLETE"), (10.0, "PRUNED"), (1.0, "COMPLETE")], states
    pruned = next(t for t in view["trials"] if t["state"] == "PRUNED")
    assert pruned["intermediate"], pruned
    job = cli.status(pruned["job_id"])
    ids = [n["instance_id"] for n in job["nodes"] if n.get("instance_id")]
    assert ids and all(i in gone_at for i in ids)
    # The goal: gone within 10 s of PRUNED. metric.py ignores the checkpoint request, so a graceful cancel
    # would wait for its end: a pruned trial's cancel skips the checkpoint.
    assert max(gone_at[i] for i in ids) - pruned["ended_at"] < 10, (gone_at, pruned["ended_at"])
    assert job["state"] == "CANCELLED"  # `sweep run` ended after its pruned trial's job did
    assert "without a checkpoint" in shipped_log(cli, pruned["job_id"], 1)


def test_the_budget_stops_dispatch_before_the_cap(cli: Cli, tmp_path: Path, sweeps: list[Sweep]) -> None:
    spec = {
        "study": "e2e-budget",
        "space": {"q": {"low": 1.0, "high": 2.0}},
        "set": {"snapshot.enabled": False, "limits.max_runtime": "2m", "train.command": metric_command("--steps 20")},
        "objective": {"metric": "val_loss"},
        "pruner": {"type": "none"},
        "trials": 20, "parallel": 1,
    }
    probe = make(sweeps, cli, tmp_path / "plan", {**spec, "study": "e2e-probe"})
    plan = cli.run("plan", str(probe.path.parent / "job" / "job.yaml"), "--set", "limits.max_runtime=2m",
                   "--output", "json", timeout=120)
    assert plan.returncode == 0, plan.stderr
    bound = json.loads(plan.stdout)["plan"]["estimated_cost"]  # a trial's price for its whole time limit
    # The first trial's bound (2 minutes) fits; twenty trials of 15-20 s (boot, setup, 6 s of training) do not, at
    # their bills' least (¥0.02 each; ten did fit once trials got faster: 0.26 of a 0.29 cap).
    cap = round(bound, 4)
    sweep = make(sweeps, cli, tmp_path / "budget", {**spec, "budget": {"max_cost": cap}})
    code, view = sweep.run()
    assert code == 4, sweep.log()[-3000:]  # stopped before its trials: not a failure of cvmjob
    assert "budget.max_cost" in view["stopped_reason"]
    assert 1 <= len(view["trials"]) < 20
    assert all(t["state"] == "COMPLETE" for t in view["trials"]), view["trials"]
    wait_until("every instance gone", lambda: nothing_left(cli.emulator), 60)
    assert view["cost"] <= cap and ledger_cny(cli) <= cap, (view["cost"], ledger_cny(cli), cap)


def test_a_training_that_always_fails_stops_the_sweep_at_the_brake(cli: Cli, tmp_path: Path,
                                                                     sweeps: list[Sweep]) -> None:
    sweep = make(sweeps, cli, tmp_path / "brakes", metric_sweep(
        "e2e-brakes", "--fail", trials=6, parallel=1, brakes={"consecutive_failures": 2}))
    code, view = sweep.run()
    assert code == 4
    assert [t["state"] for t in view["trials"]] == ["FAIL", "FAIL"]
    lines = [line for line in sweep.log().splitlines() if "brakes.consecutive_failures" in line]
    assert len(lines) == 1 and "the last 2 trials failed in training" in lines[0], sweep.log()[-3000:]


@pytest.mark.parametrize("backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_a_sweep_killed_mid_run_continues_with_exactly_its_trials(
        cli: Cli, tmp_path: Path, sweeps: list[Sweep], backend: str, request: pytest.FixtureRequest,
        receiver: Receiver) -> None:
    """...and posts its end once (notify), though the run that started it was SIGKILLed."""
    if backend == "postgres":
        from tests.postgres import fresh_database

        database = fresh_database(request.getfixturevalue("postgres_url"))
        os.environ["CVMJOB_DB"] = database.__enter__()
        request.addfinalizer(lambda: (os.environ.pop("CVMJOB_DB", None), database.__exit__(None, None, None)))
    sweep = make(sweeps, cli, tmp_path / "kill", metric_sweep(f"e2e-kill-{backend}", "--steps 30", trials=4,
                                                              parallel=2, notify=[{"url": receiver.url("json")}]))
    sweep.start()

    def training() -> bool:
        try:
            trials = sweep.status()["trials"]
        except AssertionError:  # the study is not created yet
            return False
        return any(t["state"] == "RUNNING" and t["job_id"] and cli.status(t["job_id"])["state"] == "RUNNING"
                   for t in trials)

    wait_until("a trial training", training, 240)
    assert sweep.process is not None
    sweep.process.send_signal(signal.SIGKILL)
    sweep.process.wait()
    before = sweep.status()
    assert any(t["state"] == "RUNNING" for t in before["trials"])
    code, view = sweep.run()
    assert code == 0, sweep.log()[-3000:]
    numbers = sorted(t["number"] for t in view["trials"])
    assert numbers == [0, 1, 2, 3] and all(t["state"] == "COMPLETE" for t in view["trials"]), view["trials"]
    assert len({t["job_id"] for t in view["trials"]}) == 4
    for t in before["trials"]:  # the trials running at the kill went on with their own jobs
        if t["state"] == "RUNNING":
            assert next(v for v in view["trials"] if v["number"] == t["number"])["job_id"] == t["job_id"]
    wait_until("every instance gone", lambda: nothing_left(cli.emulator), 60)
    # Its end, once, from the run that finished it (notify: in the sweep spec; its trials' job spec has none).
    [finished] = receiver.bodies("json")
    assert finished["event"] == "sweep_finished" and finished["id"] == f"sweep:e2e-kill-{backend}/sweep_finished/4"
    ended = finished["sweep"]
    assert ended["state"] == "finished" and ended["trials"] == 4, ended  # type: ignore[index]
    assert ended["best"]["number"] in numbers and ended["cost_cny"] == view["cost"], (ended, view)  # type: ignore[index]


def test_ctrl_c_cancels_the_sweep_and_its_running_trials(cli: Cli, tmp_path: Path, sweeps: list[Sweep]) -> None:
    sweep = make(sweeps, cli, tmp_path / "interrupt", metric_sweep("e2e-interrupt", "--steps 200", trials=6,
                                                                   parallel=2))
    sweep.start()
    assert sweep.process is not None
    watch = TrialJobs(cli)
    wait_until("two trials training", lambda: watch.training() >= 2, 240)
    sweep.process.send_signal(signal.SIGINT)
    code, view = sweep.finish(timeout=180)
    assert code == 130, sweep.log()[-3000:]
    assert view["state"] == "cancelled" and len(view["trials"]) == 2
    assert all(t["state"] == "FAIL" and "CANCELLED" in t["reason"] for t in view["trials"]), view["trials"]
    wait_until("every instance gone", lambda: nothing_left(cli.emulator), 60)
    again = cli.run("sweep", "status", "e2e-interrupt", "--output", "json", timeout=60)
    assert json.loads(again.stdout)["state"] == "cancelled"


class TrialJobs:
    """How many trial jobs' agents report training, from the emulator's instances and their heartbeats."""

    def __init__(self, cli: Cli) -> None:
        self.cli = cli

    def training(self) -> int:
        count = 0
        for instance in self.cli.emulator.admin.instances(processes=False):
            job_id = instance.get("tags", {}).get(TAG_JOB)
            if instance["state"] == "RUNNING" and job_id:
                status = status_doc(self.cli, job_id, int(instance["tags"].get(TAG_ATTEMPT, "1")))
                count += bool(status and status.get("phase") == "training")
        return count
