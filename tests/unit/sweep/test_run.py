"""The Sweeper's own bookkeeping, on a real store file: a warm start enqueues an earlier study's best trials once;
the intermediate values it reads from a heartbeat."""

from __future__ import annotations

from pathlib import Path

import optuna

from orchestrator.contract import MetricsAt, Phase, Status
from orchestrator.state.store import Store
from orchestrator.sweep import study as S
from orchestrator.sweep.run import JobTemplate, Sweeper, _reported
from orchestrator.sweep.spec import SweepSpec

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
