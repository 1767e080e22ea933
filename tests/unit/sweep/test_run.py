"""The Sweeper's own bookkeeping, on a real store file: a warm start enqueues an earlier study's best trials once."""

from __future__ import annotations

from pathlib import Path

import optuna

from orchestrator.state.store import Store
from orchestrator.sweep import study as S
from orchestrator.sweep.run import JobTemplate, Sweeper
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
