"""`cvmjob sweep run`: Optuna asks, each trial becomes a cvmjob job, the controller's engine drives the jobs, and
the sweep tells Optuna how each ended.

Everything the sweep knows is in the store's database: the study (Optuna's tables) and the jobs (cvmjob's). A
trial's job is named on the trial (its user attributes) before the job is submitted, with the job's id chosen
first, so a sweep killed at any point and run again finds every RUNNING trial's job: still running (followed),
ended (told), or never submitted (submitted now, under the id its trial names). No trial is asked twice, none
stays RUNNING, and the study ends with exactly ``trials`` trials.

A reclaimed trial is the same job recovering on its own (the same trial, its checkpoint, its intermediate
values); a job that the cloud failed after its own recovery is retried as a new job of the same trial.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from .. import api
from ..billing.costs import spent
from ..contract import Status
from ..notify import events as notify
from ..plan.models import Plan
from ..plan.planner import PlanError
from ..policy.loader import load_job
from ..providers.tencent.errors import CloudError
from ..spec.errors import SpecError
from ..spec.loader import read_job
from ..spec.models import LimitsSpec
from ..spec.overrides import set_values
from ..state.home import died_here
from ..state.machine import JobState, NodeState
from ..state.outbox import Outbox
from ..state.store import FencedOut, JobRecord, LeaseHeld, Store, SweeperLeases
from ..text import show_values
from . import study as S
from .errors import SweepBusy
from .models import TrialState as Shown
from .rules import (
    Ending,
    NextTrial,
    Spend,
    consecutive_failures,
    ending,
    may_start,
    placements_to_avoid,
    started,
)
from .spec import SweepSpec, placeholder_problems, render, trial_value
from .view import sweep_view

if TYPE_CHECKING:
    import optuna
    from optuna.trial import FrozenTrial

POLL_SECONDS = 2.0
ESTIMATE_MARGIN = 1.25  # the next trial is estimated at the costliest completed one's cost, and a quarter more
SHARE_OF_ESTIMATE = 2.0  # a trial's job may spend at most this many estimates (its limits.max_cost)
SWEEPER_LEASE_SECONDS = 30.0  # a `sweep run` that has not renewed its lease for this long is gone


@dataclass
class _Dispatch:
    """One step's dispatch: the cloud's facts and the sweep's ledger, each read once; each trial the step starts
    is then counted into the ledger (rules.started), not read back from the store."""

    gathered: api.Gathered
    ledger: tuple[Spend, NextTrial] | None = None


@dataclass
class JobTemplate:
    """The job every trial runs, read once: its mapping and where its relative paths start."""

    document: dict[str, Any]
    path: Path  # the job spec's file (or the sweep file, for an inline job)

    @classmethod
    def of(cls, spec: SweepSpec, sweep_path: Path) -> JobTemplate:
        if isinstance(spec.job, dict):
            return cls(dict(spec.job), sweep_path)
        path = (sweep_path.parent / spec.job).resolve()
        return cls(read_job(path), path)

    def check(self, spec: SweepSpec) -> None:
        """Every placeholder of train.command names a parameter, and the job validates with the space's first
        values: a bad sweep is refused before anything is created."""
        command = str((self.document.get("train") or {}).get("command", ""))
        problems = placeholder_problems(command, spec.space)
        if problems:
            raise SpecError.single(str(self.path), problems[0], "train.command")
        load_job(self.path, [], self.trial_document(spec, _first_values(spec), 0))

    def trial_document(self, spec: SweepSpec, params: dict[str, Any], number: int) -> dict[str, Any]:
        """The job of trial ``number``: the sweep's ``set`` applied with the trial's values as they are (a value
        that is one placeholder takes the parameter's own type; text with placeholders is rendered text) and
        placeholders rendered inside train.command."""
        document = set_values(self.document, {key: trial_value(value, params) for key, value in spec.set.items()})
        train = dict(document.get("train") or {})
        if "command" in train:
            train["command"] = render(str(train["command"]), params)
        document["train"] = train
        document["name"] = trial_job_name(spec.study, number)
        return document


def _first_values(spec: SweepSpec) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for name, param in spec.space.items():
        values[name] = param.choices[0] if param.choices else param.low
        if param.kind == "int":
            values[name] = int(values[name])
    return values


def trial_job_name(study: str, number: int) -> str:
    suffix = f"-t{number}"
    return study[: 40 - len(suffix)].rstrip("-") + suffix


@dataclass
class Sweeper:
    spec: SweepSpec
    template: JobTemplate
    store: Store
    store_url: str
    study: optuna.Study
    force_emulator: bool = False
    say: Callable[[str], None] = print
    now: Callable[[], float] = time.time
    me: str = ""
    started_at: float = 0.0
    token: int = 0  # the study's lease (SweeperLeases), taken by take_over()
    _bound: NextTrial | None = None
    _told_settling: bool = False

    # -- the loop ------------------------------------------------------------------------------------------
    def run(self, cancel: Callable[[], bool] = lambda: False, stop: Callable[[], bool] = lambda: False) -> str:
        """Until the study has ``trials`` ended trials (or dispatch stopped and the running ones ended); the
        sweep's final state. ``cancel``: a Ctrl-C (the running trials are cancelled, the sweep ends once they
        have); ``stop``: a second one (they are left to a later run). Both are only read here, never acted on in a
        signal handler: the study's storage is not re-entrant. Call take_over() first."""
        self.started_at = self.started_at or self.now()
        self._set(S.STATE_ATTR, "running")
        self._set(S.REASON_ATTR, "")
        self.study.set_user_attr(S.SPEC_ATTR, self.spec.model_dump(mode="json"))
        self._warm_start()
        cancelled = False
        while True:
            self._beat()
            if cancel() and not cancelled:
                cancelled = True
                cancel_sweep(self.study, self.store, self.now)
            state = self.step()
            if state is not None:
                self._set(S.STATE_ATTR, state)
                self._notify(state)
                return state
            if stop():
                self._set(S.STATE_ATTR, "interrupted")
                return "interrupted"
            time.sleep(POLL_SECONDS)

    def step(self) -> str | None:
        """One look at every running trial, then as many new ones as may start; the final state once done."""
        from optuna.trial import TrialState

        dispatch = _Dispatch(api.Gathered())
        for trial in self._trials(TrialState.RUNNING):
            self._follow(trial, dispatch)
        reason = self._blocked()
        while not reason and self._room():
            reason = self._afford(dispatch) or ""  # only asked when a trial would start
            if not reason:
                self._launch_new(dispatch)
                reason = self._blocked()
        said = str(self.study.user_attrs.get(S.REASON_ATTR, ""))
        if reason and said != reason:
            if _what(said) != _what(reason):  # once per limit, not at every change of its numbers
                self.say(f"sweep {self.spec.study}: no more trials for now: {reason}")
            self._set(S.REASON_ATTR, reason)
        if self._trials(TrialState.RUNNING):
            return None
        settling = [job.job_id for job in self._jobs() if not job.state.is_terminal()]
        if settling:  # a pruned trial's job still tearing down: its instance bills until the controller ends it
            if not self._told_settling:
                self.say(f"sweep {self.spec.study}: waiting for {len(settling)} ended trial(s)' job(s) to tear down")
                self._told_settling = True
            return None
        if self.study.user_attrs.get(S.CANCEL_ATTR):
            return "cancelled"
        return "stopped" if reason else "finished"

    def _notify(self, state: str) -> None:
        """The sweep's end, recorded for the senders (the trials' controller in this process sends it)."""
        if not self.spec.notify:
            return
        view = sweep_view(self.study, self.store, self.now())
        ended = [t for t in view.trials if t.state not in (Shown.RUNNING, Shown.WAITING)]
        best = None if view.best is None else {"number": view.best.number, "value": view.best.value,
                                               "params": view.best.params}
        end = notify.SweepEnd(study=self.spec.study, state=state, reason=view.stopped_reason, trials=len(ended),
                              cost_cny=view.cost, best=best)
        Outbox(self.store).add(notify.for_sweep(end, self.spec.notify, self.now()), self.now())

    # -- dispatch ------------------------------------------------------------------------------------------
    def _room(self) -> bool:
        from optuna.trial import TrialState

        running = len(self._trials(TrialState.RUNNING))
        asked = len([t for t in self.study.get_trials(deepcopy=False) if t.state != TrialState.WAITING])
        return running < self.spec.parallel and asked < self.spec.trials

    def _blocked(self) -> str:
        """Why no trial may start, whatever the money: a cancel, or a brake."""
        if self.study.user_attrs.get(S.CANCEL_ATTR):
            return "cancelled (cvmjob sweep cancel)"
        endings = self._endings()
        if Ending.BUDGET in endings:
            return ("budget.max_cost: a trial spent its whole share of the cap (its job's limits.max_cost); "
                    "raise budget.max_cost to run more")
        failures = consecutive_failures(endings)
        if failures >= self.spec.brakes.consecutive_failures:
            return (f"brakes.consecutive_failures: the last {failures} trials failed in training; fix the script "
                    f"(`cvmjob logs` of their jobs shows why) and run the sweep again")
        return ""

    def _afford(self, dispatch: _Dispatch) -> str | None:
        deadline = self.spec.budget.deadline
        spend, estimate = self._ledger_of(dispatch)
        return may_start(
            spend, estimate, max_cost=self.spec.budget.max_cost,
            gpu_hours=self.spec.budget.gpu_hours, now=self.now(),
            deadline=None if deadline is None else self.started_at + deadline)

    def _ledger_of(self, dispatch: _Dispatch) -> tuple[Spend, NextTrial]:
        """The dispatch's ledger: read once, then each trial it starts counted in by hand."""
        if dispatch.ledger is None:
            dispatch.ledger = self._ledger(dispatch.gathered)
        return dispatch.ledger

    def _ledger(self, gathered: api.Gathered | None = None) -> tuple[Spend, NextTrial]:
        """From one read of every trial's jobs: what was spent, what the running trials may still spend (up to
        their share of the cap, their jobs' limits.max_cost), and what the next trial will cost: the costliest
        completed trial with a margin once there is one, before that its plan's bound (its price for its whole
        time limit)."""
        usages = [(job, self._usage(job)) for job in self._jobs()]
        done = [used for job, used in usages if job.state == JobState.SUCCEEDED]
        if done:
            estimate = NextTrial(cost=ESTIMATE_MARGIN * max(u.cost for u in done),
                                 gpu_hours=ESTIMATE_MARGIN * max(u.gpu_hours for u in done),
                                 seconds=ESTIMATE_MARGIN * max(u.seconds for u in done))
        else:
            if self._bound is None:
                self._bound = _bound(self._plan(_first_values(self.spec), 0, gathered=gathered).plan)
            estimate = self._bound
        cost = gpu = left = gpu_left = 0.0
        for job, used in usages:
            cost += used.cost
            gpu += used.gpu_hours
            if not job.state.is_terminal():
                share = job.spec.limits.max_cost
                left += max(0.0, (estimate.cost or 0.0 if share is None else share) - used.cost)
                gpu_left += max(0.0, estimate.gpu_hours - used.gpu_hours)
        return Spend(cost, gpu, left, gpu_left), estimate

    def _launch_new(self, dispatch: _Dispatch) -> None:
        self._beat()
        trial = self.study.ask(S.distributions(self.spec))
        job_id = api.new_job_id()
        trial.set_user_attr(S.JOB_ATTR, job_id)
        trial.set_user_attr(S.JOBS_ATTR, [job_id])
        self.say(f"trial {trial.number}: {show_values(trial.params)} -> job {job_id}")
        self._submit(trial.number, trial._trial_id, trial.params, job_id, dispatch)

    def _submit(self, number: int, trial_id: int, params: dict[str, Any], job_id: str, dispatch: _Dispatch) -> None:
        """The trial's job, under the id its trial already names; counted in the dispatch's ledger."""
        from optuna.trial import TrialState

        try:
            report = self._plan(params, number, self._share_of_cap(dispatch), dispatch.gathered)
        except (SpecError, PlanError) as exc:
            self._finish(trial_id, number, TrialState.FAIL, Ending.TRAINING, f"its job cannot be planned: {exc}")
            return
        except CloudError as exc:  # still failing after the plan's own retries: the next step tries again
            self.say(f"trial {number}: its job cannot be planned now ({exc}); trying again")
            return
        api.submit(report, self.store, job_id=job_id)
        if dispatch.ledger is not None:
            spend, estimate = dispatch.ledger
            dispatch.ledger = started(spend, estimate, report.spec.limits.max_cost), estimate

    def _share_of_cap(self, dispatch: _Dispatch) -> float | None:
        """The next trial's share of budget.max_cost, which becomes its job's limits.max_cost (the job stops itself
        there): whatever a trial does, the running trials' shares and what was spent stay under the cap."""
        cap = self.spec.budget.max_cost
        if cap is None:
            return None
        spend, estimate = self._ledger_of(dispatch)
        share = cap - spend.cost - spend.running_cost_left
        return min(share, SHARE_OF_ESTIMATE * (estimate.cost or share))

    def _plan(self, params: dict[str, Any], number: int, share: float | None = None,
              gathered: api.Gathered | None = None) -> api.PlanReport:
        """The trial's job planned; ``share``: its share of the cap, in its spec before planning, and the
        placements its brakes avoid, in the planning itself: the spec, the plan and the settings the controller
        decides on are born together and never edited after."""
        document = self.template.trial_document(self.spec, params, number)
        # Limits the spec's own model refuses are left as written: the plan says what is wrong with them (a share
        # written over them would hide it).
        try:
            own = LimitsSpec.model_validate(document.get("limits") or {}).max_cost
        except ValidationError:
            share = None
        if share is not None:
            limit = round(max(share if own is None else min(share, own), 0.01), 4)
            document = set_values(document, {"limits.max_cost": limit})
        # A trial notifies only where the job spec itself says so: the user config's default is for the jobs people
        # submit, and a sweep of fifty trials posting fifty "succeeded" would bury the ones that matter.
        document = {**document, "notify": document.get("notify") or []}
        failed = self.spec.brakes.per_placement_failures
        why = f"failed {failed} times in this sweep (brakes.per_placement_failures)"
        avoid = dict.fromkeys(placements_to_avoid(self._placement_failures(), failed), why)
        return api.plan(self.template.path, [], self.force_emulator, document=document, avoid=avoid,
                        gathered=gathered)

    # -- following a trial ---------------------------------------------------------------------------------
    def _follow(self, trial: FrozenTrial, dispatch: _Dispatch) -> None:
        from optuna.trial import TrialState

        job_id = trial.user_attrs.get(S.JOB_ATTR)
        if job_id is None:  # asked, then the sweep died before naming its job: name one now
            job_id = api.new_job_id()
            self._trial_attr(trial._trial_id, S.JOB_ATTR, job_id)
            self._trial_attr(trial._trial_id, S.JOBS_ATTR, [job_id])
        job = self.store.get(job_id)
        if job is None:  # named, then not submitted: the sweep died, or the cloud failed its plan
            self.say(f"trial {trial.number}: submitting its job {job_id}")
            self._submit(trial.number, trial._trial_id, trial.params, job_id, dispatch)
            return
        if not job.state.is_terminal():
            if job.state == JobState.RUNNING:
                self._report(trial, job)
            return
        end = ending(job.state)
        if end == Ending.COMPLETE:
            self._complete(trial, job)
        elif end == Ending.INFRASTRUCTURE and len(trial.user_attrs.get(S.JOBS_ATTR, [])) <= self.spec.retries:
            retry = api.new_job_id()
            self._trial_attr(trial._trial_id, S.JOBS_ATTR, [*trial.user_attrs.get(S.JOBS_ATTR, []), retry])
            self._trial_attr(trial._trial_id, S.JOB_ATTR, retry)
            self.say(f"trial {trial.number}: job {job_id} ended {job.state.value} ({job.reason}); retrying as {retry}")
            self._submit(trial.number, trial._trial_id, trial.params, retry, dispatch)
        else:
            self._finish(trial._trial_id, trial.number, TrialState.FAIL, end, f"job {job_id} {job.state.value}: "
                         f"{job.reason}")

    def _report(self, trial: FrozenTrial, job: JobRecord) -> None:
        """Every intermediate value the training reported since the last look, to Optuna (its pruners compare
        trials at the same step: a sample would rarely line up); a trial its pruner stops is told PRUNED at once
        and its job cancelled without a checkpoint (nothing resumes a pruned trial): its instance goes within
        seconds."""
        from optuna.trial import Trial, TrialState

        if len(self.spec.objectives) > 1:
            return
        metric = self.spec.objectives[0].metric
        new = [(step, value) for step, value in _reported(_status(job), metric)
               if step not in trial.intermediate_values]  # the trial as read at this step: what Optuna has
        if not new:
            return
        live = Trial(self.study, trial._trial_id)
        for step, value in new:
            live.report(value, step)
        step, value = new[-1]
        if live.should_prune():
            api.cancel(self.store, job, self.now, checkpoint=False)
            self._finish(trial._trial_id, trial.number, TrialState.PRUNED, Ending.CANCELLED,
                         f"pruned at step {step} ({metric}={value:g}); its job {job.job_id} is cancelled")

    def _complete(self, trial: FrozenTrial, job: JobRecord) -> None:
        from optuna.trial import TrialState

        view = api.agent_view(job)
        values = []
        for objective in self.spec.objectives:
            value = _final(view, objective.metric)
            if value is None:
                self._finish(trial._trial_id, trial.number, TrialState.FAIL, Ending.TRAINING,
                             f"job {job.job_id} succeeded but never reported {objective.metric} "
                             "(trainkit.report(step, loss, **metrics))")
                return
            values.append(value)
        self._beat()
        self.study.tell(trial.number, values, skip_if_finished=True)
        self.say(f"trial {trial.number}: COMPLETE, {show_values(dict(zip(self._metric_names(), values, strict=True)))}")

    def _finish(self, trial_id: int, number: int, state: Any, end: Ending, reason: str) -> None:
        self._beat()
        self._trial_attr(trial_id, S.KIND_ATTR, end.value)
        self._trial_attr(trial_id, S.REASON_TRIAL_ATTR, reason)
        self.study.tell(number, state=state, skip_if_finished=True)
        self.say(f"trial {number}: {state.name}: {reason}")

    # -- the study's records -------------------------------------------------------------------------------
    def _trials(self, *states: Any) -> list[FrozenTrial]:
        return self.study.get_trials(deepcopy=False, states=states)

    def _endings(self) -> list[Ending]:
        from optuna.trial import TrialState

        ended = []
        for t in sorted(self.study.get_trials(deepcopy=False), key=lambda t: t.datetime_complete or t.datetime_start
                        or 0):
            if t.state == TrialState.COMPLETE:
                ended.append(Ending.COMPLETE)
            elif t.state == TrialState.FAIL and t.user_attrs.get(S.KIND_ATTR):
                ended.append(Ending(t.user_attrs[S.KIND_ATTR]))
        return ended

    def _jobs(self) -> list[JobRecord]:
        ids = [job_id for t in self.study.get_trials(deepcopy=False) for job_id in t.user_attrs.get(S.JOBS_ATTR, [])]
        return list(self.store.get_many(ids).values())

    def _usage(self, job: JobRecord) -> _Usage:
        """What a job cost (its bill once ended, the estimate from its nodes' prices while it runs), its GPU hours
        and its running time."""
        now = self.now()
        nodes = self.store.nodes(job.job_id)
        gpus = {p.instance_type: p.gpus for p in job.plan.candidates}
        ran = [(n, ((n.ended_at or now) - n.running_at) / 3600) for n in nodes if n.running_at is not None]
        return _Usage(spent(job, nodes, now), sum(gpus.get(n.instance_type, 0) * hours for n, hours in ran),
                      (job.updated_at if job.state.is_terminal() else now) - job.created_at)

    def _placement_failures(self) -> list[tuple[str, str]]:
        failed = []
        for job in self._jobs():
            if job.state.is_terminal() and ending(job.state) == Ending.INFRASTRUCTURE:
                failed += [(n.zone, n.instance_type) for n in self.store.nodes(job.job_id)
                           if n.state == NodeState.FAILED]
        return failed

    def _metric_names(self) -> list[str]:
        return [o.metric for o in self.spec.objectives]

    def _warm_start(self) -> None:
        warm = self.spec.warm_start
        if warm is None or self.study.user_attrs.get("cvmjob:warm_started"):
            return
        from optuna.trial import TrialState

        source = S.load_study(warm.study, self.store_url)
        done = [t for t in source.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))]
        sign = 1 if self.spec.objectives[0].direction == "minimize" else -1
        best = sorted(done, key=lambda t: sign * (t.values or [0.0])[0])[: warm.best]
        for t in best:
            params = {k: v for k, v in t.params.items() if k in self.spec.space}
            self.study.enqueue_trial(params, skip_if_exists=True)
        self._set("cvmjob:warm_started", True)
        self.say(f"sweep {self.spec.study}: warm start with the best {len(best)} trial(s) of {warm.study}")

    def take_over(self) -> None:
        """Make this process the study's one `sweep run` (SweepBusy while another live one is), and clear an
        earlier run's cancel: running the sweep again continues it."""
        study = self.spec.study
        try:  # a holder of this home whose process is gone (a sweep killed with -9) is not waited out
            self.token = SweeperLeases(self.store).acquire(study, self.me, SWEEPER_LEASE_SECONDS, self.now(),
                                                           gone=died_here)
        except LeaseHeld as exc:
            raise SweepBusy(f"{exc}; `cvmjob sweep status {study}` follows it") from None
        self._set(S.CANCEL_ATTR, False)

    def _beat(self) -> None:
        """Renew the study's lease: asked every round and before each word to the study, so that a run another
        took over stops before it tells a trial twice (SweepBusy)."""
        try:
            SweeperLeases(self.store).renew(self.spec.study, self.token, SWEEPER_LEASE_SECONDS, self.now())
        except FencedOut as exc:
            raise SweepBusy(f"{exc}: this run stops and leaves its trials to that one") from None

    def release(self) -> None:
        """Give the study's lease back (the run ended): the next `sweep run` need not wait it out."""
        SweeperLeases(self.store).release(self.spec.study, self.token)

    def _set(self, key: str, value: Any) -> None:
        self.study.set_user_attr(key, value)

    def _trial_attr(self, trial_id: int, key: str, value: Any) -> None:
        self.study._storage.set_trial_user_attr(trial_id, key, value)


def cancel_sweep(study: optuna.Study, store: Store, now: Callable[[], float] = time.time) -> None:
    """No more trials, and every running trial's job cancelled (checkpoint, upload, destroy); the `sweep run`
    tells those trials FAIL as their jobs end (or the next run does)."""
    from optuna.trial import TrialState

    study.set_user_attr(S.CANCEL_ATTR, True)
    for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        job = store.get(t.user_attrs.get(S.JOB_ATTR, ""))
        if job is not None:
            api.cancel(store, job, now)


@dataclass(frozen=True)
class _Usage:
    cost: float
    gpu_hours: float
    seconds: float


def _bound(plan: Plan) -> NextTrial:
    """A trial's bound before any completed: its first placement's price for its whole time limit."""
    hours = plan.expected_hours
    first = plan.candidates[0] if plan.candidates else None
    gpus = (first.gpus if first else 0) * plan.nnodes
    return NextTrial(plan.estimated_cost, gpus * hours, hours * 3600)


def _status(job: JobRecord) -> Status | None:
    return api.agent_view(job).status


def _reported(status: Status | None, name: str) -> list[tuple[int, float]]:
    """(step, value) of the metric as the heartbeat carries it, oldest first: its recent reports (the loss: the
    latest step alone, it moves every step)."""
    if status is None:
        return []
    if name == "loss":
        return [] if status.loss is None or status.step is None else [(status.step, status.loss)]
    return [(r.step, r.metrics[name]) for r in status.recent_metrics if name in r.metrics]


def _final(view: api.AgentView, name: str) -> float | None:
    """The metric as the last attempt reported it last (its result; the loss is in its last heartbeat)."""
    if name == "loss":
        return view.status.loss if view.status else None
    return view.result.metrics.get(name) if view.result else None


def _what(reason: str) -> str:
    """The limit a stop reason names (``budget.max_cost``, ``brakes...``): its text up to the first colon."""
    return reason.split(":", 1)[0]



