"""The Sweeper's own bookkeeping, on a real store file: a warm start enqueues an earlier study's best trials once;
the intermediate values it reads from a heartbeat; a trial's share of the cap is its job's limit; one `sweep run`
drives a study at a time, and one another took over tells it nothing more."""

from __future__ import annotations

from pathlib import Path

import optuna
import pytest

from orchestrator import api
from orchestrator.contract import MetricsAt, Phase, Status
from orchestrator.spec.loader import read_job
from orchestrator.state.store import Store
from orchestrator.sweep import study as S
from orchestrator.sweep.rules import Ending
from orchestrator.sweep.run import SWEEPER_LEASE_SECONDS, JobTemplate, SweepBusy, Sweeper, _Dispatch, _reported
from orchestrator.sweep.spec import SweepSpec
from tests.emulator_process import EmulatorProcess

QUICKSTART = Path(__file__).resolve().parents[3] / "jobs" / "quickstart" / "job.yaml"
SPEC = {
    "study": "tonight", "job": {"name": "x"}, "space": {"x": {"low": 0.0, "high": 1.0}},
    "objective": {"metric": "val_loss"}, "trials": 5, "warm_start": {"study": "yesterday", "best": 2},
}


def test_a_warm_start_runs_the_earlier_studys_best_trials_first_and_only_once(tmp_path: Path) -> None:
    url = str(tmp_path / "state.db")
    store = Store(url)
    yesterday = optuna.create_study(study_name="yesterday", storage=S.storage(url))
    for x, value in ((0.1, 3.0), (0.2, 1.0), (0.3, 2.0), (0.4, 4.0)):
        yesterday.enqueue_trial({"x": x})
        trial = yesterday.ask({"x": optuna.distributions.FloatDistribution(0, 1)})
        yesterday.tell(trial, value)
    spec = SweepSpec.model_validate(SPEC)
    tonight = S.open_study(spec, url)
    said: list[str] = []
    sweeper = Sweeper(spec, JobTemplate({"name": "x"}, tmp_path / "sweep.yaml"), store, url, tonight, say=said.append)
    sweeper._warm_start()
    sweeper._warm_start()  # a second run of tonight's sweep enqueues nothing more
    waiting = tonight.get_trials(states=(optuna.trial.TrialState.WAITING,))
    assert [t.system_attrs["fixed_params"]["x"] for t in waiting] == [0.2, 0.3]  # what ask() will take
    assert said == ["sweep tonight: warm start with the best 2 trial(s) of yesterday"]
    store.close()
    for study in (yesterday, tonight):  # Optuna caches an RDB storage; its engine's pool is closed here, not by gc
        study._storage._backend.engine.dispose()  # type: ignore[attr-defined]


def test_the_intermediate_values_are_every_recent_report_of_the_metric() -> None:
    status = Status(attempt=1, node_rank=0, instance_id="ins-1", phase=Phase.TRAINING, time=1.0, seq=3, step=12,
                    loss=0.25, recent_metrics=[MetricsAt(step=4, metrics={"acc": 0.5}),
                                               MetricsAt(step=8, metrics={"acc": 0.6, "val_loss": 1.0}),
                                               MetricsAt(step=12, metrics={"acc": 0.7, "val_loss": 0.8})])
    assert _reported(status, "val_loss") == [(8, 1.0), (12, 0.8)]
    assert _reported(status, "loss") == [(12, 0.25)]  # the loss moves every step: its latest value
    assert _reported(None, "val_loss") == []


def on_the_emulator(monkeypatch: pytest.MonkeyPatch, emulator: EmulatorProcess, tmp_path: Path) -> None:
    for name, value in (("CVMJOB_ENDPOINT", emulator.endpoint), ("TENCENTCLOUD_SECRET_ID", emulator.secret_id),
                        ("TENCENTCLOUD_SECRET_KEY", emulator.secret_key), ("CVMJOB_HOME", str(tmp_path / "home"))):
        monkeypatch.setenv(name, value)


def test_a_trials_share_of_the_cap_is_the_limit_its_controller_decides_on(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, emulator: EmulatorProcess) -> None:
    # The share was once written into the job's spec after planning: the spec said it, the settings the
    # controller decides on had none, and a runaway trial could spend past the sweep's cap.
    on_the_emulator(monkeypatch, emulator, tmp_path)
    url = str(tmp_path / "state.db")
    store = Store(url)
    job = {**read_job(QUICKSTART), "data": []}
    spec = SweepSpec.model_validate({"study": "capped", "job": job, "space": {"lr": {"low": 0.1, "high": 1.0}},
                                     "objective": {"metric": "val_loss"}, "trials": 2,
                                     "budget": {"max_cost": 3.0}})
    study = S.open_study(spec, url)
    sweeper = Sweeper(spec, JobTemplate(job, QUICKSTART), store, url, study, say=lambda line: None)
    trial = study.ask(S.distributions(spec))
    sweeper._submit(trial.number, trial._trial_id, trial.params, "job-capped0", _Dispatch(api.Gathered()))
    record = store.get("job-capped0")
    assert record is not None
    limit = record.spec.limits.max_cost
    assert limit is not None and 0 < limit <= 3.0
    assert record.settings.max_cost == limit
    store.close()
    study._storage._backend.engine.dispose()  # type: ignore[attr-defined]


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def test_one_sweep_run_drives_a_study_and_one_taken_over_tells_it_nothing_more(tmp_path: Path) -> None:
    # The sweeper was a study attribute, read then written: a run paused past its beat (SIGSTOP, a laptop's lid)
    # and woken after another took over wrote itself back in and told the trials the other one drove (Optuna's
    # second tell of a trial raised ValueError, uncaught).
    url = str(tmp_path / "state.db")
    store = Store(url)
    spec = SweepSpec.model_validate({**SPEC, "warm_start": None})
    study = S.open_study(spec, url)
    clock = Clock()

    def sweeper(me: str) -> Sweeper:
        return Sweeper(spec, JobTemplate({"name": "x"}, tmp_path / "sweep.yaml"), store, url, study,
                       say=lambda line: None, now=clock, me=me)

    first, second = sweeper("sweep-a"), sweeper("sweep-b")
    first.take_over()
    with pytest.raises(SweepBusy, match="driven by another `cvmjob sweep run` \\(sweep-a"):
        second.take_over()
    trial = study.ask(S.distributions(spec))
    clock.t += SWEEPER_LEASE_SECONDS + 1  # the first one stopped renewing: its lease ran out
    second.take_over()
    second._finish(trial._trial_id, trial.number, optuna.trial.TrialState.FAIL, Ending.TRAINING, "second's word")
    with pytest.raises(SweepBusy, match="another `cvmjob sweep run` took the study tonight over"):
        first._finish(trial._trial_id, trial.number, optuna.trial.TrialState.FAIL, Ending.CANCELLED, "first's word")
    (told,) = study.get_trials()
    assert (told.state, told.user_attrs[S.REASON_TRIAL_ATTR]) == (optuna.trial.TrialState.FAIL, "second's word")
    with pytest.raises(SweepBusy):
        first._beat()  # its round stops too
    second.release()
    first.take_over()  # a released study is free at once
    store.close()
    study._storage._backend.engine.dispose()  # type: ignore[attr-defined]


def test_a_trials_set_values_keep_their_types_and_text_is_rendered(tmp_path: Path) -> None:
    spec = SweepSpec.model_validate({
        "study": "typed", "job": {"name": "x", "train": {"command": "python t.py --lr {lr}"}},
        "space": {"lr": {"low": 0.0001, "high": 0.1, "log": True}, "nodes": {"choices": [1, 2]},
                  "opt": {"choices": ["adam", "null"]}},
        "set": {"train.nnodes": "{nodes}", "train.env.LR": "{lr}", "train.env.RUN": "lr-{lr}-{opt}",
                "train.env.OPT": "{opt}", "limits.max_cost": 4.5},
        "objective": {"metric": "val_loss"}, "trials": 3})
    template = JobTemplate({"name": "x", "train": {"command": "python t.py --lr {lr}"}}, tmp_path / "sweep.yaml")
    document = template.trial_document(spec, {"lr": 1e-3, "nodes": 2, "opt": "null"}, 7)
    assert document["train"]["nnodes"] == 2
    assert document["train"]["env"] == {"LR": 1e-3, "RUN": "lr-0.001-null", "OPT": "null"}  # "null" stays text
    assert document["limits"]["max_cost"] == 4.5
    assert document["train"]["command"] == "python t.py --lr 0.001" and document["name"] == "typed-t7"


def test_one_dispatch_gathers_the_clouds_facts_once_and_counts_in_each_trial_it_starts(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, emulator: EmulatorProcess) -> None:
    on_the_emulator(monkeypatch, emulator, tmp_path)
    url = str(tmp_path / "state.db")
    store = Store(url)
    job = {**read_job(QUICKSTART), "data": []}
    spec = SweepSpec.model_validate({"study": "round", "job": job, "space": {"lr": {"low": 0.1, "high": 1.0}},
                                     "objective": {"metric": "val_loss"}, "trials": 3, "parallel": 3,
                                     "budget": {"max_cost": 30.0}})
    study = S.open_study(spec, url)
    sweeper = Sweeper(spec, JobTemplate(job, QUICKSTART), store, url, study, say=lambda line: None)
    dispatch = _Dispatch(api.Gathered())
    before = emulator.admin.calls(action="DescribeZoneInstanceConfigInfos")[-1:]
    since = before[0]["seq"] if before else None
    for number in range(2):
        trial = study.ask(S.distributions(spec))
        trial.set_user_attr(S.JOBS_ATTR, [f"job-round00{number}"])  # as _launch_new names it
        sweeper._submit(trial.number, trial._trial_id, trial.params, f"job-round00{number}", dispatch)
    # Three plans (the first trial's bound and two trials), one gathering: quickstart is on demand, one charge type.
    assert len(emulator.admin.calls(action="DescribeZoneInstanceConfigInfos", since=since)) == 1
    assert dispatch.ledger is not None
    counted, _ = dispatch.ledger
    jobs = [store.get(f"job-round00{n}") for n in range(2)]
    shares = [j.spec.limits.max_cost for j in jobs if j is not None]
    fresh, _ = sweeper._ledger()  # read back from the store: what the dispatch counted in by hand
    assert len(shares) == 2 and counted.running_cost_left == pytest.approx(sum(shares))
    assert fresh.running_cost_left == pytest.approx(counted.running_cost_left)
    store.close()
