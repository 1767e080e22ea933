"""A sweep seen from outside (`sweep status`, `sweep report`): its study's trials joined with their jobs."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from ..billing.costs import spent
from ..state.machine import JobState
from ..state.store import JobRecord, Store
from . import study as S
from .models import Best, Preemption, SweepView, TrialState, TrialView

if TYPE_CHECKING:
    import optuna
    from optuna.trial import FrozenTrial


def sweep_view(study: optuna.Study, store: Store, now: float | None = None) -> SweepView:
    now = time.time() if now is None else now
    attrs = study.user_attrs
    spec = attrs.get(S.SPEC_ATTR) or {}
    objective = spec.get("objective") or []
    metrics = [o["metric"] for o in (objective if isinstance(objective, list) else [objective])]
    trials = [_trial(t, store, now) for t in study.get_trials(deepcopy=False)]
    return SweepView(
        study=study.study_name,
        directions=[d.name.lower() for d in study.directions],
        metrics=metrics,
        state=str(attrs.get(S.STATE_ATTR, "unknown")),
        trials=trials,
        best=_best(study),
        cost=round(sum(t.cost for t in trials), 6),
        max_cost=(spec.get("budget") or {}).get("max_cost"),
        stopped_reason=str(attrs.get(S.REASON_ATTR, "")),
    )


def _trial(t: FrozenTrial, store: Store, now: float) -> TrialView:
    job_ids: list[str] = list(t.user_attrs.get(S.JOBS_ATTR, []))
    jobs = [job for job_id in job_ids if (job := store.get(job_id)) is not None]
    preemptions = [p for job in jobs for p in _preemptions(job, store)]
    return TrialView(
        number=t.number,
        state=TrialState(t.state.name),
        value=t.values[0] if t.values else None,
        values=list(t.values) if t.values and len(t.values) > 1 else None,
        params=dict(t.params),
        cost=round(sum(spent(job, store.nodes(job.job_id), now) for job in jobs), 6),
        attempts=sum(job.attempt for job in jobs),
        retries=max(0, len(job_ids) - 1),
        job_id=t.user_attrs.get(S.JOB_ATTR),
        started_at=t.datetime_start.timestamp() if t.datetime_start else None,
        ended_at=t.datetime_complete.timestamp() if t.datetime_complete else None,
        preemptions=preemptions,
        intermediate=dict(t.intermediate_values),
        reason=str(t.user_attrs.get(S.REASON_TRIAL_ATTR, "")),
    )


def sweeps_of_jobs(store: str) -> dict[str, str]:
    """The study of every job a sweep's trials ran (retries included), by job id: the store keeps no sweep on a
    job; its trials name their jobs (JOBS_ATTR)."""
    return {job_id: name for name in S.study_names(store)
            for t in S.load_study(name, store).get_trials(deepcopy=False)
            for job_id in t.user_attrs.get(S.JOBS_ATTR, [])}


def _preemptions(job: JobRecord, store: Store) -> list[Preemption]:
    """Each attempt the cloud took back, and the GPU time it lost: from the reclaim until the next attempt
    trained again (the steps since the last checkpoint are in the job's step log)."""
    plan = job.plan
    gpus = max(1.0, max((p.gpus for p in plan.candidates), default=0.0)) * plan.nnodes
    events = [e for e in store.events(job.job_id) if e.kind == "transition"]
    out = []
    for i, e in enumerate(events):
        if e.to_state != JobState.RECOVERING.value or e.from_state != JobState.RUNNING.value:
            continue
        back = next((later.at for later in events[i + 1:] if later.to_state == JobState.RUNNING.value), None)
        lost = ((back if back is not None else e.at) - e.at) / 60 * gpus
        out.append(Preemption(at=e.at, gpu_minutes_lost=round(lost, 3)))
    return out


def _best(study: optuna.Study) -> Best | None:
    try:
        best = study.best_trials[0] if len(study.directions) > 1 else study.best_trial
    except (ValueError, IndexError):  # no completed trial yet
        return None
    values: list[Any] = list(best.values or [])
    return Best(number=best.number, value=values[0] if values else None,
                values=values if len(values) > 1 else None, params=dict(best.params))
