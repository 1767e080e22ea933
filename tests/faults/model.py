"""A small in-process model of the world for the random-mix property test: the pure ``decide()`` (design.md §4:
decide has no I/O) driven against a simulated cloud, agents and store, with seeded faults.

This is not a mock of Tencent Cloud's API (the fault matrix runs the real SDK against the real emulator): it
models only what ``observe()`` would report and what ``execute`` would change, in the terms ``decide`` reads
(InstanceView, ImageView, Status, Result, NodeRecord, JobRecord), on a simulated clock. What it adds is volume:
hundreds of seeded mixes of failed lookups, unreadable reports, lost RunInstances responses, capacity errors,
launch failures, failing terminations, reclaims with and without notice, crashed and hung trainings, silent
agents, cancels, image failures and hangs, and controller crashes between a cloud call and the record of its
outcome, each checked against the invariants after every step.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from typing import Any

from orchestrator.contract import ImageContents, Outcome, Phase, Result, Status
from orchestrator.lifecycle import actions as A
from orchestrator.lifecycle.decide import decide
from orchestrator.lifecycle.observation import NodeSeen, Observation
from orchestrator.plan.models import Placement, Plan
from orchestrator.plan.settings import Backoff, RecoveryRules, Settings
from orchestrator.providers.tencent.compute import InstanceView
from orchestrator.providers.tencent.images import ImageView
from orchestrator.state.machine import JobState, NodeState, check_transition
from orchestrator.state.store import JobRecord, NodeRecord
from tests.records import job_record

S = JobState
ALIVE = ("PENDING", "RUNNING")
T0 = 1_800_000_000.0


class Violation(AssertionError):
    pass


@dataclass
class Faults:
    """What can go wrong in one seed's world (probabilities per call or per step)."""

    lookup_fails: float
    reports_unreadable: float
    launch_capacity: float
    launch_transient: float
    launch_response_lost: float
    launch_failed: float
    launch_permanent: float  # RunInstances refused for good (bad parameters): PermanentFailure
    terminate_fails: float
    reclaim_notice: float  # per step while training, spot only
    reclaim_silent: float
    training_fails: float
    training_long: float  # longer than limits.max_runtime
    training_hangs: float
    agent_silent: float
    bootstrap_fails: float
    cancel_at: float | None
    image_fails: float
    image_hangs: float
    image_refused: float
    controller_crash: float  # per executed cloud mutation: the outcome is not recorded

    @classmethod
    def draw(cls, rng: random.Random) -> Faults:
        def p(high: float) -> float:
            return rng.choice([0.0, 0.0, rng.uniform(0, high)])

        return cls(
            lookup_fails=p(0.3),
            reports_unreadable=p(0.3),
            launch_capacity=p(0.5),
            launch_transient=p(0.4),
            launch_response_lost=p(0.4),
            launch_failed=p(0.3),
            launch_permanent=rng.choice([0.0] * 9 + [0.2]),
            terminate_fails=p(0.6),
            reclaim_notice=p(0.02),
            reclaim_silent=p(0.02),
            training_fails=p(0.5),
            training_long=p(0.3),
            training_hangs=p(0.3),
            agent_silent=p(0.3),
            bootstrap_fails=p(0.3),
            cancel_at=rng.choice([None, None, None, rng.uniform(0, 400)]),
            image_fails=p(0.5),
            image_hangs=p(0.3),
            image_refused=p(0.3),
            controller_crash=p(0.2),
        )


@dataclass
class Agent:
    reports_at: float | None  # first heartbeat; None: the bootstrap fails, it never reports
    train_seconds: float
    outcome: Outcome
    silent_from: float | None = None  # heartbeats stop (a wedged agent); the instance stays RUNNING
    stop: tuple[Outcome, float] | None = None  # a stop request (cancel, reclaim notice) and when it ends the attempt
    result: Result | None = None


@dataclass
class Instance:
    instance_id: str
    attempt: int
    node: int
    zone: str
    charge_type: str
    state: str  # PENDING, RUNNING, LAUNCH_FAILED, TERMINATING, gone
    created: float
    due: float  # when PENDING ends / TERMINATING ends
    agent: Agent
    reclaim_at: float | None = None

    def view(self, job_id: str) -> InstanceView:
        tags = {"cvmjob:job": job_id, "cvmjob:attempt": str(self.attempt), "cvmjob:node": str(self.node)}
        return InstanceView(self.instance_id, self.state, self.zone, "S5.MEDIUM4", self.charge_type, "127.0.0.1",
                            datetime.fromtimestamp(self.created, timezone.utc), tags,
                            "no stock" if self.state == "LAUNCH_FAILED" else None)


@dataclass
class Image:
    image_id: str
    state: str
    ready_at: float
    fails: bool
    hangs: bool


@dataclass
class World:
    seed: int
    rng: random.Random
    faults: Faults
    settings: Settings
    job: JobRecord
    now: float = T0
    nodes: dict[tuple[int, int], NodeRecord] = field(default_factory=dict)
    instances: dict[str, Instance] = field(default_factory=dict)
    tokens: dict[str, str] = field(default_factory=dict)
    images: dict[str, Image] = field(default_factory=dict)
    events: list[tuple[float, str, str]] = field(default_factory=list)
    entered_at: float = T0
    launches: int = 0
    trained_ok: bool = False
    log: list[str] = field(default_factory=list)

    # -- the cloud and the agents move on --------------------------------------------------------------------
    def tick(self) -> None:
        f, rng = self.faults, self.rng
        for inst in self.instances.values():
            if inst.state == "PENDING" and self.now >= inst.due:
                inst.state = "LAUNCH_FAILED" if rng.random() < f.launch_failed else "RUNNING"
                inst.due = self.now + 300  # a LAUNCH_FAILED instance stays listed for minutes
                if inst.state == "RUNNING" and inst.agent.reports_at is not None:
                    inst.agent.reports_at = self.now + inst.agent.reports_at
            elif inst.state in ("LAUNCH_FAILED", "TERMINATING") and self.now >= inst.due:
                inst.state = "gone"
            if inst.state == "RUNNING":
                self._agent(inst)
                if inst.reclaim_at is not None and self.now >= inst.reclaim_at:
                    inst.state, inst.due = "TERMINATING", self.now + 1
                elif inst.charge_type == "SPOTPAID" and inst.reclaim_at is None and self._training(inst):
                    if rng.random() < f.reclaim_silent:
                        inst.state, inst.due = "gone", self.now
                    elif rng.random() < f.reclaim_notice:
                        inst.reclaim_at = self.now + 120
                        self._stop(inst, Outcome.PREEMPTED, 20)
        for image in self.images.values():
            if image.state == "CREATING" and self.now >= image.ready_at and not image.hangs:
                image.state = "CREATEFAILED" if image.fails else "NORMAL"

    def _training(self, inst: Instance) -> bool:
        a = inst.agent
        return a.reports_at is not None and self.now >= a.reports_at and a.result is None

    def _stop(self, inst: Instance, outcome: Outcome, within: float) -> None:
        if inst.agent.stop is None and inst.agent.result is None:
            inst.agent.stop = (outcome, self.now + self.rng.uniform(1, within))

    def _agent(self, inst: Instance) -> None:
        a = inst.agent
        if a.reports_at is None or self.now < a.reports_at or a.result is not None:
            return
        if a.silent_from is not None and self.now >= a.silent_from:
            return  # wedged: no heartbeat, no result
        end: tuple[Outcome, float] = (a.outcome, a.reports_at + a.train_seconds)
        if a.stop is not None and a.stop[1] < end[1]:
            end = a.stop
        if self.now >= end[1]:
            # Like the real agent (agent/seal.py), a succeeded node 0 says what it left for the image.
            sealed = ImageContents(job_id="model", job_name="model", attempt=inst.attempt) \
                if end[0] == Outcome.SUCCEEDED and inst.node == 0 else None
            a.result = Result(attempt=inst.attempt, node_rank=inst.node, instance_id=inst.instance_id,
                              outcome=end[0], exit_code=0, reason="model", time=end[1], image=sealed)

    def status_of(self, inst: Instance) -> Status | None:
        a = inst.agent
        if a.reports_at is None or self.now < a.reports_at:
            return None
        last = min(self.now, a.silent_from if a.silent_from is not None else self.now)
        if a.result is not None:
            last = min(last, a.result.time)
        if inst.state not in ("RUNNING", "TERMINATING"):
            last = min(last, inst.due)
        phase = Phase.DONE if a.result is not None else Phase.TRAINING
        return Status(attempt=inst.attempt, node_rank=inst.node, instance_id=inst.instance_id, phase=phase,
                      time=last, seq=1, step=1)

    # -- observe ---------------------------------------------------------------------------------------------
    def observe(self) -> Observation:
        job = self.job
        if self.rng.random() < self.faults.lookup_fails and job.state not in (S.PENDING, S.STAGING):
            return Observation(now=self.now, cloud_ok=False, cloud_error="RequestLimitExceeded (model)")
        current = {n.node: n for (a, _), n in self.nodes.items() if a == job.attempt}
        by_node: dict[int, Instance] = {}
        strays = []
        for inst in self.instances.values():
            if inst.state == "gone":
                continue
            record = current.get(inst.node) if inst.attempt == job.attempt else None
            if record is not None and inst.node not in by_node and record.instance_id in (None, inst.instance_id):
                by_node[inst.node] = inst
            else:
                strays.append(inst.view(job.job_id))
        image = None
        if job.image_id and job.image_id in self.images:
            im = self.images[job.image_id]
            image = ImageView(im.image_id, "n", im.state, "PRIVATE_IMAGE", "", {})
        agents_ok = not (self.rng.random() < self.faults.reports_unreadable)
        seen = []
        for node, record in sorted(current.items()):
            reporter = by_node.get(node)
            if reporter is None and record.instance_id in self.instances:
                reporter = self.instances[record.instance_id]  # its documents stay in COS after it is gone
            status = result = None
            if agents_ok and reporter is not None and job.state in (S.BOOTING, S.RUNNING, S.CANCELLING,
                                                                      S.RECOVERING):
                status, result = self.status_of(reporter), reporter.agent.result
            view = by_node[node].view(job.job_id) if node in by_node else None
            seen.append(NodeSeen(node, record.instance_id, view, status, result))
        return Observation(now=self.now, cloud_ok=True, nodes=tuple(seen), strays=tuple(strays), image=image,
                           agents_ok=agents_ok, agents_error="" if agents_ok else "COS 503 (model)")

    # -- execute ---------------------------------------------------------------------------------------------
    def move(self, target: JobState, reason: str, **changes: Any) -> None:
        check_transition(self.job.state, target)  # IllegalTransition is a violation
        self.events.append((self.now, self.job.state.value, target.value))
        self.job = replace(self.job, state=target, reason=reason, **changes)
        self.entered_at = self.now

    def crashed(self) -> bool:
        return self.rng.random() < self.faults.controller_crash

    def run(self, action: A.Action) -> bool:
        """Like Executor.run: False ends the round. A controller crash after a cloud call loses its record."""
        rng, f = self.rng, self.faults
        if isinstance(action, A.Stage):
            return True
        if isinstance(action, A.StartAttempt):
            attempt = self.job.attempt + 1
            for node in range(self.settings.nnodes):
                p = action.placement
                self.nodes[(attempt, node)] = NodeRecord(
                    self.job.job_id, attempt, node, f"tok-{attempt}-{node}", p.zone, p.instance_type, p.charge_type,
                    p.price_per_hour, None, NodeState.INTENT)
            self.move(S.LAUNCHING, action.reason, attempt=attempt)
            return False
        if isinstance(action, A.Launch):
            return self._launch(action.node.node)
        if isinstance(action, A.MarkNodes):
            for node, state, reason in action.updates:
                rec = self.nodes[(self.job.attempt, node)]
                if state == "running":
                    rec = replace(rec, state=NodeState.RUNNING, running_at=rec.running_at or self.now)
                else:
                    rec = replace(rec, state=state, end_reason=reason, ended_at=rec.ended_at or self.now)
                self.nodes[(self.job.attempt, node)] = rec
            return True
        if isinstance(action, A.Terminate):
            if rng.random() < f.terminate_fails:
                return False
            for instance_id in action.instance_ids:
                inst = self.instances[instance_id]
                if inst.state in ALIVE:
                    inst.state, inst.due = "TERMINATING", self.now + rng.uniform(0.5, 3)
            if self.crashed():
                raise Crash
            for key, rec in self.nodes.items():
                if rec.instance_id in action.instance_ids and rec.ended_at is None:
                    self.nodes[key] = replace(rec, ended_at=self.now)
            return True
        if isinstance(action, A.Move):
            changes: dict[str, Any] = {}
            if action.outcome is not None:
                changes["outcome"] = action.outcome
            if action.keep_until is not None:
                changes["keep_until"] = action.keep_until
            self.move(action.target, action.reason, **changes)
            return False
        if isinstance(action, A.RequestCancel):
            for inst in self.instances.values():
                if inst.attempt == self.job.attempt and inst.state == "RUNNING":
                    self._stop(inst, Outcome.CANCELLED, 30)
            return True
        if isinstance(action, A.CreateImage):
            return self._create_image()
        if isinstance(action, A.DiscardImage):
            self.images.pop(action.image_id, None)
            return True
        if isinstance(action, A.ApplyImageRetention | A.RefreshCredentials | A.RecordBill | A.RecordSuccess):
            return True
        if isinstance(action, A.Wait):
            self.now += action.seconds
            return False
        raise Violation(f"the model does not know {action!r}")

    def _launch(self, node: int) -> bool:
        rng, f = self.rng, self.faults
        rec = self.nodes[(self.job.attempt, node)]
        for inst in self.instances.values():
            if inst.attempt != self.job.attempt and inst.state in ALIVE:
                raise Violation(f"launching attempt {self.job.attempt} while {inst.instance_id} of attempt "
                                f"{inst.attempt} is {inst.state}")
        if rng.random() < f.launch_transient:
            return False  # RequestLimitExceeded after the retries: the same ClientToken next round
        if rng.random() < f.launch_permanent:
            raise Permanent("RunInstances refused: InvalidParameter (model)")
        if rec.client_token not in self.tokens and rng.random() < f.launch_capacity:
            self.nodes[(self.job.attempt, node)] = replace(
                rec, state=NodeState.FAILED, end_reason="ResourcesSoldOut (model)", ended_at=self.now)
            return False
        if rec.client_token not in self.tokens:
            self.launches += 1
            instance_id = f"ins-{self.launches:08d}"
            agent = Agent(
                reports_at=None if rng.random() < f.bootstrap_fails else rng.uniform(1, 10),
                train_seconds=rng.uniform(5, 120) if rng.random() >= f.training_long else 5000.0,
                outcome=(Outcome.TRAINING_FAILED if rng.random() < f.training_fails
                         else Outcome.HUNG if rng.random() < f.training_hangs else Outcome.SUCCEEDED),
            )
            if rng.random() < f.agent_silent:
                agent.silent_from = self.now + rng.uniform(5, 60)
            self.instances[instance_id] = Instance(instance_id, rec.attempt, node, rec.zone, rec.charge_type,
                                                   "PENDING", self.now, self.now + rng.uniform(0.5, 5), agent)
            self.tokens[rec.client_token] = instance_id
        if rng.random() < f.launch_response_lost or self.crashed():
            return False  # created, but the answer (or the controller) was lost: nothing recorded
        self.nodes[(self.job.attempt, node)] = replace(rec, instance_id=self.tokens[rec.client_token],
                                                        state=NodeState.LAUNCHED, launched_at=self.now)
        return True

    def _create_image(self) -> bool:
        rng, f = self.rng, self.faults
        mine = [i for i in self.images.values()]
        if mine:
            image = mine[0]  # created before a crash: adopted (its tags name the job)
        else:
            if rng.random() < f.image_refused:
                self.job = replace(self.job, image_error="refused (model)")
                return False
            image = Image(f"img-{len(self.images) + 1:08d}", "CREATING", self.now + rng.uniform(1, 60),
                          rng.random() < f.image_fails, rng.random() < f.image_hangs)
            self.images[image.image_id] = image
            if self.crashed():
                raise Crash
        self.job = replace(self.job, image_id=image.image_id)
        return False


class Crash(Exception):
    """The controller died between a cloud call and the record of its outcome."""


class Permanent(Exception):
    """execute.PermanentFailure: drive() moves the job to its end (TEARING_DOWN, FAILED_ERROR)."""


def new_world(seed: int) -> World:
    rng = random.Random(seed)
    faults = Faults.draw(rng)
    spot = rng.random() < 0.5
    charge = "SPOTPAID" if spot else "POSTPAID_BY_HOUR"
    candidates = [Placement(zone=z, instance_type="S5.MEDIUM4", charge_type=c, price_per_hour=0.3)
                  for c in ([charge, "POSTPAID_BY_HOUR"] if spot else [charge])
                  for z in ("ap-guangzhou-3", "ap-guangzhou-4")]
    plan = Plan(region="ap-guangzhou", image_id="img-487zeit5", candidates=candidates, state_bucket="b-1250000000")
    settings = Settings(
        nnodes=rng.choice([1, 1, 2]),
        snapshot=rng.random() < 0.7,
        keep_on_failure=rng.random() < 0.3,
        keep_for=rng.choice([30.0, 120.0]),
        max_cost=rng.choice([None, None, None, 0.01]),
        bootstrap_timeout=60.0,
        pending_timeout=60.0,
        cancel_grace=60.0,
        image_timeout=90.0,
        poll_seconds=1.0,
        recovery=RecoveryRules(max_preemptions=rng.choice([0, 2, 5]), max_launch_failures=rng.choice([2, 5]),
                               same_zone_retries=1, backoff=Backoff(1, 8, 2, 0.2), give_up_after=900,
                               heartbeat_stale_after=30, on_demand_after_preemptions=rng.choice([None, 1])),
    )
    job = job_record(
        f"job-{seed:08x}", "mix", S.PENDING, plan=plan, attempt=0, created_at=T0, updated_at=T0,
        deadline=T0 + rng.choice([600.0, 1800.0]), lease_owner="model", lease_expires=T0 + 30, settings=settings,
    )
    return World(seed, rng, faults, settings, job)


MAX_STEPS = 6000


def simulate(seed: int) -> World:
    """Drive one seeded world to the end; raises Violation when an invariant breaks."""
    w = new_world(seed)
    for _ in range(MAX_STEPS):
        if w.job.state.is_terminal():
            check_end(w)
            return w
        w.tick()
        if w.faults.cancel_at is not None and w.now - T0 >= w.faults.cancel_at and not w.job.cancel_requested:
            w.job = replace(w.job, cancel_requested=True)
        obs = w.observe()
        nodes = [w.nodes[k] for k in sorted(w.nodes)]
        actions = decide(w.job, nodes, obs, w.settings, w.job.plan, w.entered_at)
        if not obs.cloud_ok and not all(isinstance(a, A.Wait) for a in actions):
            raise Violation(f"concluded {actions} from a failed lookup")
        if any(isinstance(a, A.Move) and a.target.is_terminal() for a in actions):
            live = [i.instance_id for i in w.instances.values() if i.state in (*ALIVE, "TERMINATING")]
            if live:
                raise Violation(f"{w.job.state.value} ends the job while {live} live")
        if any(isinstance(a, A.Move) and a.target == S.SUCCEEDED for a in actions):
            w.trained_ok = True
        try:
            for action in actions:
                if not w.run(action):
                    break
        except Crash:
            pass  # a new controller starts from the store (this world's records) and the cloud
        except Permanent as exc:  # what drive() does with a PermanentFailure
            if w.job.state == S.TEARING_DOWN:
                raise Violation("a permanent failure in TEARING_DOWN") from exc
            target = S.FAILED_ERROR if w.job.state == S.PENDING else S.TEARING_DOWN
            w.move(target, str(exc), outcome=S.FAILED_ERROR)
        if not any(isinstance(a, A.Wait) for a in actions):
            w.now += 0.2
        if w.now > w.job.deadline + 3600:
            break
    raise Violation(f"not terminal after {MAX_STEPS} steps / {w.now - T0:.0f} s: {w.job.state.value} {w.job.reason}")


def _causes(w: World) -> dict[JobState, bool]:
    """Whether this world's faults could explain each failure state at all."""
    f = w.faults
    return {
        S.FAILED: f.training_fails > 0,
        S.FAILED_HUNG: f.training_hangs > 0,
        S.FAILED_BOOTSTRAP: f.bootstrap_fails > 0 or f.agent_silent > 0,
        S.FAILED_PREEMPTED: f.reclaim_notice > 0 or f.reclaim_silent > 0 or f.agent_silent > 0,
        S.FAILED_NO_CAPACITY: f.launch_capacity > 0 or f.launch_failed > 0,
        S.FAILED_ERROR: f.launch_permanent > 0,
        S.CANCELLED: f.cancel_at is not None,
        S.FAILED_BUDGET: w.settings.max_cost is not None,
    }


def check_end(w: World) -> None:
    if not _causes(w).get(w.job.state, True):
        raise Violation(f"ended {w.job.state.value} ({w.job.reason}) with no fault that could cause it")
    live = [i.instance_id for i in w.instances.values() if i.state in (*ALIVE, "TERMINATING")]
    if live:
        raise Violation(f"ended {w.job.state.value} with live instances {live}")
    failed = [i.image_id for i in w.images.values() if i.state == "CREATEFAILED"]
    if failed:
        raise Violation(f"failed images left behind: {failed}")
    if w.job.state == S.SUCCEEDED:
        done = [i for i in w.instances.values() if i.agent.result is not None and
                i.agent.result.outcome == Outcome.SUCCEEDED and i.attempt == w.job.attempt]
        if len(done) != w.settings.nnodes:
            raise Violation("SUCCEEDED without every node of the last attempt reporting success")
    per_key: dict[tuple[int, int], int] = {}
    for inst in w.instances.values():
        per_key[(inst.attempt, inst.node)] = per_key.get((inst.attempt, inst.node), 0) + 1
    if any(count > 1 for count in per_key.values()):
        raise Violation(f"more than one instance per (attempt, node): {per_key}")
