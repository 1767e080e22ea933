"""execute: carry out one action against the cloud, COS and the store.

Crash safety (design.md §4): the intent is persisted before every cloud mutation and the outcome after it, and
every mutation is idempotent when repeated from the store after a crash: RunInstances carries a ClientToken
derived from (job, attempt, node); CreateImage is preceded by a lookup of the job's tagged images; terminating
something already gone is success.
"""

from __future__ import annotations

import functools
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from enum import Enum
from pathlib import Path
from typing import Any

from ..ci import fingerprint
from ..ci.facts import run_facts
from ..contract import (
    Control,
    CredentialsDoc,
    Fingerprint,
    FingerprintEntry,
    JobLayout,
    Result,
    Status,
    TemporaryKeys,
    Unread,
    UnreadWhy,
    agent_wheel_key,
    latest_key,
)
from ..contract.tags import TAG_JOB, TAG_NAME, TAG_OWNER, owner
from ..plan.models import Placement, Plan
from ..providers.tencent import TencentSdk, billing, compute, images, sts
from ..providers.tencent.errors import (
    AuthError,
    CapacityError,
    CloudError,
    QuotaError,
    StateConflictError,
    TransientError,
)
from ..providers.tencent.retry import guarded, retrying
from ..providers.tencent.storage import ObjectStore
from ..providers.tencent.vocabulary import ChargeType, ImageState
from ..spec.models import JobSpec
from ..spec.snapshot import render_snapshot_name
from ..staging import agent_config, bundle
from ..staging.bootstrap import user_data
from ..staging.launch import client_token, launch_request, node_name, node_tags
from ..state import jobdoc
from ..state.home import cvmjob_home
from ..state.machine import JobState, NodeState
from ..state.store import ImageRecord, JobRecord, NodeRecord, PoolStore, Store
from ..target import Target
from .actions import (
    Action,
    ApplyImageRetention,
    CreateImage,
    DiscardImage,
    Launch,
    MarkNodes,
    Move,
    RecordBill,
    RecordSuccess,
    RefreshCredentials,
    ReleasePool,
    RequestCancel,
    Stage,
    StartAttempt,
    Terminate,
    Wait,
)
from .lease import LeaseGuard
from .observation import KeysRefused
from .observe import read_node_doc

ACTION_TIMER_MARGIN = 600.0  # the instance's own deadline trails the job's by this much
CREDENTIAL_SECONDS = 7200  # GetFederationToken maximum for a root account
MAX_PRESIGN_SECONDS = 7 * 24 * 3600

Emit = Callable[[str, str], None]


class Next(Enum):
    """What the round does after an action."""

    CONTINUE = "continue"  # on with the round's next action
    LOOK_AGAIN = "look again"  # the job or the cloud changed (or a Wait): a new look before anything else


class PermanentFailure(RuntimeError):
    """A cloud error no retry or other placement fixes (bad parameters, permissions): the job fails."""


class AgentKeysRefused(PermanentFailure):
    """The cloud refused to issue the agents' short-lived COS keys; the message names the permission. Fatal to an
    attempt that has none yet; a refresh is retried while the agents' keys last (decide.py)."""


def keys_refusal(exc: AuthError) -> str:
    return (f"the cloud refused new COS keys for the agents ({exc.code}: {exc.message}); the controller's key needs "
            "the CAM action sts:GetFederationToken")


@dataclass
class Ensured:
    """What has been made sure of in state buckets: that one exists, that an agent wheel is in it. An engine's
    executors share one, so that a controller staging a thousand jobs asks COS once, not once a job. A bucket or
    wheel deleted behind a live controller is not noticed (the agents then fail to boot, and the job says so)."""

    _done: set[tuple[str, str]] = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def once(self, state: ObjectStore, what: str, ensure: Callable[[], None]) -> None:
        where = (f"{state.sdk.region}/{state.bucket}", what)
        with self._lock:
            if where in self._done:
                return
        ensure()  # two threads may both ensure: each step of it is idempotent
        with self._lock:
            self._done.add(where)

def pool_holder(node: NodeRecord) -> str:
    """Who holds a pool member: one node of one attempt of one job."""
    return f"{node.job_id}/a{node.attempt}n{node.node}"


@dataclass
class Executor:
    store: Store
    token: int
    job_id: str
    target: Target
    sdk: TencentSdk
    state: ObjectStore
    spec: JobSpec
    plan: Plan
    source_dir: Path
    guard: LeaseGuard  # consulted before every action and every attempt of its cloud calls
    now: Callable[[], float] = time.time
    emit: Emit = lambda kind, message: None
    ensured: Ensured = field(default_factory=Ensured)  # shared by the executors of one engine
    _told: str = ""  # the reason of the last Wait told to the user, while it lasts
    _unread_told: set[tuple[str, UnreadWhy]] = field(default_factory=set)  # agent documents said to be taken absent
    # The cloud's refusal of the agents' new keys, until keys are issued again: decide() reads it (Observation) to
    # retry with backoff and not to take the silence it causes for a lost instance. A restarted controller learns
    # it again by its first try.
    keys_refused: KeysRefused | None = None

    @property
    def layout(self) -> JobLayout:
        return JobLayout(self.job_id)

    def job(self) -> JobRecord:
        job = self.store.get(self.job_id)
        assert job is not None
        return job

    @property
    def pools(self) -> PoolStore:
        return PoolStore(self.store)

    @property
    def pool(self) -> str | None:
        return self.spec.billing.pool

    def tell_unread(self, unread: Iterable[Unread]) -> None:
        """Says in the job's events (and to the user) each agent document that was there but not taken, once for
        its key and reason: a training that keeps writing garbage there would otherwise add an event every round."""
        for doc in unread:
            if (doc.key, doc.why) not in self._unread_told:
                self.store.note(self.job_id, self.token, "agent", doc.describe(), self.now())
                self.emit("agent", doc.describe())
                self._unread_told.add((doc.key, doc.why))

    def run(self, action: Action) -> Next:
        """Carry out ``action``, and say whether the round goes on with its next action."""
        if not isinstance(action, Wait):
            # A stale controller (another took the lease while it was paused) must not act at all: its writes to
            # the store are fenced, but its cloud calls came first (a Terminate, a Launch, the agents' keys).
            self.guard.check(waited=True)  # the store asked once (or the lease renewed on the spot)
        handler: Callable[[Executor, Any], Next] = _HANDLERS[type(action)]
        with guarded(self.guard.check):  # and before every attempt of its cloud calls (lifecycle/lease.py)
            return handler(self, action)

    # -- staging and attempts ----------------------------------------------------------------------------
    def _Stage(self, action: Stage) -> Next:
        layout = self.layout
        with tempfile.TemporaryDirectory(prefix="cvmjob-bundle-") as tmp:
            # Never ship cvmjob's own state (it may sit inside the workdir): reading the live SQLite file from
            # this process would also drop the process's locks on it.
            try:
                archive = bundle.workdir_archive(
                    (self.source_dir / self.spec.workdir).resolve(), Path(tmp) / "w.tgz", exclude=(cvmjob_home(),)
                )
            except bundle.BundleError as exc:  # a full disk: the job fails saying so, before anything is created
                raise PermanentFailure(f"staging failed: {exc}") from exc
            self.emit("stage", f"workdir: {archive.files} files, {archive.size / 1e6:.1f} MB")
            self.ensured.once(self.state, "", self._ensure_bucket)
            retrying(lambda: self.state.put_json(layout.spec, self.spec.model_dump(mode="json")))
            retrying(lambda: self.state.upload_file(archive.path, layout.workdir_archive))
        self._agent_wheel()
        return Next.CONTINUE

    def _ensure_bucket(self) -> None:
        if not self.state.bucket_exists():
            self.emit("stage", f"creating the state bucket {self.state.bucket}")
            retrying(self.state.create_bucket)

    def _agent_wheel(self) -> str:
        """The key of this release's agent wheel in the state bucket, put there unless it is already."""
        wheel = bundle.agent_wheel()
        key = agent_wheel_key(wheel.sha256, wheel.name)

        def ensure() -> None:
            if self.state.head(key) is None:
                retrying(lambda: self.state.put_bytes(key, wheel.data))

        self.ensured.once(self.state, key, ensure)
        return key

    def _StartAttempt(self, action: StartAttempt) -> Next:
        job = self.job()
        attempt = job.attempt + 1
        p = action.placement
        for node in range(self.spec.train.nnodes):
            record = NodeRecord(
                job_id=self.job_id,
                attempt=attempt,
                node=node,
                client_token=client_token(self.job_id, attempt, node),
                zone=p.zone,
                instance_type=p.instance_type,
                charge_type=p.charge_type,
                price_per_hour=p.price_per_hour,
                instance_id=None,
                state=NodeState.INTENT,
                on_demand_price_per_hour=p.on_demand_price_per_hour,
            )
            if p.charge_type == ChargeType.RESERVED:
                record = self._claim_pool_member(record)
            self.store.put_node(self.token, record)
        keys = self._write_agent_configs(job, attempt, p)
        self.store.transition(
            self.job_id,
            self.token,
            job.state,
            JobState.LAUNCHING,
            f"attempt {attempt}: {p.label()} ({action.reason})",
            self.now(),
            attempt=attempt,
            **self._keys_on_record(keys),
        )
        self.emit(
            "launch",
            f"attempt {attempt}: {p.label()}"
            + (f" at {p.price_per_hour:.2f} CNY/h" if p.price_per_hour is not None else ""),
        )
        return Next.LOOK_AGAIN

    def _claim_pool_member(self, record: NodeRecord) -> NodeRecord:
        """A reserved node runs on an idle pool member of a placement the plan allows; a member another job took
        meanwhile makes the node fail like a launch without capacity (the pool policy then decides)."""
        assert self.pool is not None
        placements = self.plan.reserved_placements()
        member = self.pools.claim(self.pool, placements, pool_holder(record), self.now())
        if member is None:
            return replace(record, state=NodeState.FAILED, end_reason=f"reserved pool {self.pool} busy",
                           ended_at=self.now())
        self.emit(
            "pool",
            f"node {record.node}: reserved pool member {member.instance_id} ({member.instance_type}, {member.zone})",
        )
        return replace(
            record,
            instance_id=member.instance_id,
            zone=member.zone,
            instance_type=member.instance_type,
            price_per_hour=0.0,
        )

    def _ReleasePool(self, action: ReleasePool) -> Next:
        for node in self.store.nodes(self.job_id):
            if node.instance_id in action.instance_ids and node.state != NodeState.RELEASED:
                self.pools.release(node.instance_id, pool_holder(node), self.now())
                released = replace(node, state=NodeState.RELEASED, ended_at=node.ended_at or self.now())
                self.store.put_node(self.token, released)
                self.emit("pool", f"gave {node.instance_id} back to the reserved pool")
        return Next.CONTINUE

    # -- agent configuration and credentials -------------------------------------------------------------
    def _issue_keys(self) -> TemporaryKeys:
        granted = agent_config.grants(self.job_id, self.spec, self.plan)
        name = agent_config.federation_name(self.job_id)
        creds = retrying(lambda: sts.federation_token(self.sdk, name, self.target.appid, granted, CREDENTIAL_SECONDS))
        return TemporaryKeys(
            secret_id=creds.secret_id, secret_key=creds.secret_key, token=creds.token, expires_at=creds.expires_at
        )

    def _write_credentials(self, attempt: int) -> TemporaryKeys:
        try:
            keys = self._issue_keys()
        except AuthError as exc:  # escaping as it was, it killed the controller and left the job to its silence
            raise AgentKeysRefused(keys_refusal(exc)) from exc
        self.keys_refused = None
        retrying(
            lambda: self.state.put_json(
                self.layout.credentials(attempt), CredentialsDoc(keys=keys).model_dump(mode="json")
            )
        )
        return keys

    def _presign_seconds(self, job: JobRecord) -> int:
        return int(min(MAX_PRESIGN_SECONDS, max(3600.0, job.deadline - self.now() + 3600)))

    def _write_agent_configs(self, job: JobRecord, attempt: int, placement: Placement) -> TemporaryKeys | None:
        """Every node's agent.json of ``attempt`` on ``placement``; the short-lived keys they carry (None with a CAM
        role)."""
        role = self.spec.cam_role
        keys = None if role else self._write_credentials(attempt)
        wanted = self.spec.checkpoints.resume_from
        if attempt == 1 and wanted is not None and self.plan.resume_from is None:  # latest-of: found no job then
            said = f"checkpoints.resume_from {wanted}: no such job had a complete checkpoint at plan time; starts fresh"
            self.store.note(self.job_id, self.token, "checkpoints", said, self.now())
            self.emit("checkpoints", said)
        layout = self.layout
        credentials_url = (
            None if role else self.state.presigned_get_url(layout.credentials(attempt), self._presign_seconds(job))
        )
        configs = agent_config.agent_configs(self.job_id, self.spec, self.plan, self.target, attempt, placement,
                                             keys, credentials_url)
        for config in configs:
            key, doc = layout.agent_config(attempt, config.node_rank), config.model_dump(mode="json")
            retrying(functools.partial(self.state.put_json, key, doc))
        return keys

    def _keys_on_record(self, keys: TemporaryKeys | None) -> dict[str, float]:
        """The job's columns that tell decide() when the agents' keys were issued and expire (it rotates them)."""
        return {} if keys is None else {"keys_issued_at": self.now(), "keys_expire_at": float(keys.expires_at)}

    def _RefreshCredentials(self, action: RefreshCredentials) -> Next:
        refused = self.keys_refused
        try:
            keys = self._write_credentials(self.job().attempt)
        except AgentKeysRefused as exc:
            self._keys_refused(str(exc))
            return Next.CONTINUE
        self.store.update(self.job_id, self.token, self.now(), **self._keys_on_record(keys))
        if refused is not None:
            self.store.note(self.job_id, self.token, "credentials",
                            f"new COS keys issued to the agents after {refused.tries} refusal(s)", self.now())
        self.emit("credentials", f"issued fresh short-lived COS keys to the agents ({action.reason})")
        return Next.CONTINUE

    def _keys_refused(self, reason: str) -> None:
        """Remembered for decide() (it retries with backoff while the agents' keys last); said once, not at every
        try."""
        tries = 1 if self.keys_refused is None else self.keys_refused.tries + 1
        self.keys_refused = KeysRefused(reason, self.now(), tries)
        if tries == 1:
            expires = self.job().keys_expire_at
            left = "" if expires is None else f" (theirs expire in {max(0.0, expires - self.now()) / 60:.0f} min)"
            said = f"{reason}; trying again while the agents' keys last{left}"
            self.store.note(self.job_id, self.token, "credentials", said, self.now())
            self.emit("credentials", said)

    # -- instances ---------------------------------------------------------------------------------------
    def _launch_request(self, job: JobRecord, node: NodeRecord) -> compute.LaunchRequest:
        seconds = self._presign_seconds(job)
        data = user_data(
            self.job_id,
            node.attempt,
            node.node,
            # Ensured here too: a job staged by an earlier release has its wheel elsewhere.
            wheel_url=self.state.presigned_get_url(self._agent_wheel(), seconds),
            config_url=self.state.presigned_get_url(self.layout.agent_config(node.attempt, node.node), seconds),
        )
        return launch_request(
            self.spec, node, self.plan.image_id,
            client_token=node.client_token,
            name=node_name(self.spec, self.job_id, node.attempt, node.node),
            tags=node_tags(self.spec, self.job_id, node.attempt, node.node),
            user_data_b64=data,
            terminate_at=datetime.fromtimestamp(max(job.deadline + ACTION_TIMER_MARGIN, self.now() + 420),
                                                timezone.utc),
        )

    def _Launch(self, action: Launch) -> Next:
        job, node = self.job(), action.node
        request = self._launch_request(job, node)
        if node.charge_type == ChargeType.RESERVED:
            return self._reimage_pool_member(node, request)
        try:
            ids = retrying(lambda: compute.run_instances(self.sdk, request))
        except (CapacityError, QuotaError) as exc:
            self.store.put_node(
                self.token,
                replace(node, state=NodeState.FAILED, end_reason=f"{exc.code}: {exc.message}", ended_at=self.now()),
            )
            self.emit("capacity", f"no capacity for {request.instance_type} in {request.zone}: {exc.code}")
            return Next.LOOK_AGAIN
        except TransientError as exc:
            self.emit("retry", f"RunInstances still failing ({exc.code}); will retry with the same ClientToken")
            return Next.LOOK_AGAIN
        except CloudError as exc:
            raise PermanentFailure(f"RunInstances refused: {exc}") from exc
        launched = replace(node, instance_id=ids[0], state=NodeState.LAUNCHED, launched_at=self.now())
        self.store.put_node(self.token, launched)
        self.emit("launch", f"instance {ids[0]} created ({request.instance_type}, {request.zone})")
        return Next.CONTINUE

    def _reimage_pool_member(self, node: NodeRecord, request: compute.LaunchRequest) -> Next:
        """ResetInstance puts the job's image and UserData on the member: a clean system disk, the agent starting
        at boot, nothing of the previous job's left there (the agent clears the data disk of other jobs' data)."""
        assert node.instance_id is not None
        try:
            retrying(
                lambda: compute.reset_instance(
                    self.sdk, node.instance_id or "", request.image_id, request.user_data_b64
                )
            )
        except (TransientError, StateConflictError) as exc:
            self.emit("retry", f"ResetInstance of {node.instance_id} not possible yet ({exc.code}); retrying")
            return Next.LOOK_AGAIN
        except CloudError as exc:
            self.store.put_node(
                self.token,
                replace(node, state=NodeState.FAILED, end_reason=f"{exc.code}: {exc.message}", ended_at=self.now()),
            )
            return Next.LOOK_AGAIN
        self.store.put_node(self.token, replace(node, state=NodeState.LAUNCHED, launched_at=self.now()))
        self.emit("launch", f"re-imaging reserved instance {node.instance_id} for this job")
        return Next.CONTINUE

    def _MarkNodes(self, action: MarkNodes) -> Next:
        job = self.job()
        by_node = {n.node: n for n in self.store.nodes(self.job_id, job.attempt)}
        now = self.now()
        for node, state, reason in action.updates:
            record = by_node[node]
            if state == NodeState.RUNNING:
                record = replace(record, state=NodeState.RUNNING, running_at=record.running_at or now)
            else:
                record = replace(record, state=state, end_reason=reason, ended_at=record.ended_at or now)
            self.store.put_node(self.token, record)
            if state != NodeState.RUNNING:
                self.emit("lost", f"node {node}: {reason}")
        return Next.CONTINUE

    def _Terminate(self, action: Terminate) -> Next:
        if not action.instance_ids:
            return Next.CONTINUE
        try:
            retrying(lambda: compute.terminate(self.sdk, list(action.instance_ids)))
        except TransientError as exc:
            self.emit("retry", f"TerminateInstances failing ({exc.code}); retrying")
            return Next.LOOK_AGAIN
        except StateConflictError as exc:
            # decide leaves out the instances it saw in a state TerminateInstances refuses; one that entered such
            # a state since the look gets here, and the next look, which finds it still to be terminated, asks again.
            self.emit("retry", f"an instance cannot be terminated yet ({exc.code}); retrying")
            return Next.LOOK_AGAIN
        now = self.now()
        for node in self.store.nodes(self.job_id):
            if node.instance_id in action.instance_ids and node.ended_at is None:
                self.store.put_node(self.token, replace(node, ended_at=now))
        self.emit("terminate", f"terminating {', '.join(action.instance_ids)} ({action.reason})")
        return Next.CONTINUE

    # -- job transitions ---------------------------------------------------------------------------------
    def _Move(self, action: Move) -> Next:
        job = self.job()
        changes: dict[str, Any] = {}
        if action.outcome is not None:
            changes["outcome"] = action.outcome
        if action.keep_until is not None:
            changes["keep_until"] = action.keep_until
        self.store.transition(self.job_id, self.token, job.state, action.target, action.reason, self.now(), **changes)
        self.emit("state", f"{action.target.value}: {action.reason}")
        if job.attempt > 0:  # before its first attempt a job has nothing to follow, and no COS write delays a launch
            jobdoc.publish(self.state, self.job(), self.store.nodes(self.job_id), self.store.events(self.job_id))
        return Next.LOOK_AGAIN

    def _RequestCancel(self, action: RequestCancel) -> Next:
        job = self.job()
        control = Control(action="cancel", reason=action.reason, checkpoint=action.checkpoint, time=self.now())
        retrying(lambda: self.state.put_json(self.layout.control(job.attempt), control.model_dump(mode="json")))
        return Next.CONTINUE

    def _Wait(self, action: Wait) -> Next:
        """Says a wait worth telling, once while it lasts; the engine schedules the next look."""
        if action.tell and action.reason != self._told:
            self.emit("wait", action.reason)
        self._told = action.reason if action.tell else ""
        return Next.LOOK_AGAIN

    # -- images --------------------------------------------------------------------------------------------
    def _CreateImage(self, action: CreateImage) -> Next:
        job = self.job()
        existing = retrying(lambda: images.find_by_tags(self.sdk, {TAG_JOB: self.job_id}))
        if existing:  # created before a crash: adopt it
            image_id, name = existing[0].image_id, existing[0].name
        else:
            instance = next(
                (n.instance_id for n in self.store.nodes(self.job_id, job.attempt) if n.node == 0 and n.instance_id),
                None,
            )
            if instance is None:
                raise PermanentFailure("no instance to image")
            name = render_snapshot_name(
                self.spec.snapshot.name,
                name=self.spec.name,
                job_id=self.job_id,
                attempt=job.attempt,
                at=datetime.fromtimestamp(self.now(), timezone.utc),
            )
            tags = {**self.spec.tags, TAG_JOB: self.job_id, TAG_NAME: self.spec.name, TAG_OWNER: owner()}
            try:
                image_id = retrying(lambda: images.create_image(self.sdk, instance, name, tags))
            except CloudError as exc:
                self.emit("image", f"CreateImage failed ({exc.code}); finishing without an image")
                self.store.update(self.job_id, self.token, self.now(), image_error=f"{exc.code}: {exc.message}")
                return Next.LOOK_AGAIN
        record = ImageRecord(image_id, self.job_id, name, ImageState.CREATING, self.now(), None)
        self.store.put_image(self.token, record)
        self.store.update(self.job_id, self.token, self.now(), image_id=image_id)
        self.emit("image", f"creating image {image_id} ({name})")
        return Next.LOOK_AGAIN

    def _ApplyImageRetention(self, action: ApplyImageRetention) -> Next:
        job = self.job()
        # Only images of jobs this store holds: $USER@hostname is shared by a second CVMJOB_HOME, a CI runner or a
        # host of the same name, whose job of the same name made its own images (they were deleted).
        named = retrying(lambda: images.find_by_tags(self.sdk, {TAG_NAME: self.spec.name, TAG_OWNER: owner()}))
        known = self.store.get_many({i.tags.get(TAG_JOB, "") for i in named})
        ready = sorted((i for i in named if i.state.ready and i.tags.get(TAG_JOB) in known), key=lambda i: i.created_at)
        doomed = [i for i in ready[: max(0, len(ready) - action.keep_last)] if i.image_id != job.image_id]
        if doomed:
            try:
                retrying(lambda: images.delete(self.sdk, [i.image_id for i in doomed]))
            except CloudError as exc:
                self.emit("image", f"could not delete old images ({exc.code}); `cvmjob gc` will")
                return Next.CONTINUE
            for image in doomed:
                self.emit("image", f"deleted old image {image.image_id} ({image.name}), keeping {action.keep_last}")
        return Next.CONTINUE

    def _DiscardImage(self, action: DiscardImage) -> Next:
        try:
            retrying(lambda: images.delete(self.sdk, [action.image_id]))
        except CloudError as exc:
            self.emit("image", f"could not delete the failed image {action.image_id} ({exc.code}); `cvmjob gc` will")
            return Next.CONTINUE
        self.emit("image", f"deleted the failed image {action.image_id}")
        return Next.CONTINUE

    # -- the bill ------------------------------------------------------------------------------------------
    def _RecordBill(self, action: RecordBill) -> Next:
        total = 0.0
        for node in self.store.nodes(self.job_id):
            if node.instance_id is None:
                continue
            cost: float | None = 0.0
            if node.charge_type == ChargeType.RESERVED:
                source = "pool"  # a reserved pool's period is paid whether jobs run or not: a job adds nothing
            else:
                try:
                    cost = billing.resource_cost(
                        self.sdk, node.instance_id, datetime.fromtimestamp(node.launched_at or self.now(), timezone.utc)
                    )
                except CloudError:
                    cost = None
                source = "estimate" if cost is None else "bill"
            if cost is None:
                cost = node.priced(node.price_per_hour, self.now())
            cost = round(cost or 0.0, 2)
            total += cost
            self.store.put_node(
                self.token,
                replace(node, cost_cny=cost, cost_source=source, training_seconds=self._training_seconds(node),
                        state=NodeState.GONE if node.state in (NodeState.LAUNCHED, NodeState.RUNNING) else node.state),
            )
        self.store.update(self.job_id, self.token, self.now(), cost_cny=round(total, 2))
        self.store.note(self.job_id, self.token, "bill", f"{total:.2f} CNY", self.now())
        self.emit("bill", f"cost {total:.2f} CNY")
        return Next.CONTINUE

    def _training_seconds(self, node: NodeRecord) -> float | None:
        """How long the node's training ran, from its agent's last status (`cvmjob cost` sets the rest of its
        billed time apart); 0 when its agent never reported (it never trained), None when that cannot be read."""
        try:
            found = retrying(lambda: read_node_doc(self.state, self.layout.status(node.attempt, node.node), Status,
                                                   node.attempt, node.node, node.instance_id))
        except CloudError:
            return None
        if isinstance(found, Unread):  # not the node's own status (of another layout version, or garbage)
            return None
        return 0.0 if found is None else found.training_seconds

    def _RecordSuccess(self, action: RecordSuccess) -> Next:
        job, now = self.job(), self.now()
        first = next((n for n in self.store.nodes(self.job_id, job.attempt) if n.node == 0), None)
        found = retrying(lambda: read_node_doc(self.state, self.layout.result(job.attempt, 0), Result, job.attempt,
                                               0, first.instance_id if first else None))
        if isinstance(found, Unread):  # rewritten since the round that saw it succeed
            self.tell_unread([found])
        metrics = found.metrics if isinstance(found, Result) else {}
        facts = run_facts(replace(job, state=JobState.SUCCEEDED, updated_at=now), self.store.events(self.job_id),
                          metrics, now)
        retrying(lambda: self.state.put_json(latest_key(job.name, facts.ref or ""), facts.model_dump(mode="json")))
        if job.fingerprint is not None:
            self._index_inputs(job, job.fingerprint, metrics, now)
        return Next.CONTINUE

    def _index_inputs(self, job: JobRecord, taken: Fingerprint, metrics: dict[str, float], now: float) -> None:
        changed = fingerprint.changed_data(taken, retrying(lambda: fingerprint.data_digests(self.spec, self.sdk)))
        if changed:
            detail = f"its data changed while it trained: {'; '.join(changed)}; not reused by `run --if-changed`"
            self.store.note(self.job_id, self.token, "note", detail, now)
            self.emit("fingerprint", detail)
            return
        entry = FingerprintEntry(job_id=self.job_id, name=job.name, finished_at=now, fingerprint=taken,
                                 outputs=agent_config.locations(self.job_id, self.spec, self.state.bucket).outputs,
                                 metrics=metrics, image_id=job.image_id)
        retrying(lambda: self.state.put_json(fingerprint.index_key(taken), entry.model_dump(mode="json")))
        self.emit("fingerprint", "inputs recorded: `run --if-changed` on the same inputs reuses this job")


_HANDLERS: dict[type, Callable[[Executor, Any], Next]] = {
    Stage: Executor._Stage,
    StartAttempt: Executor._StartAttempt,
    ReleasePool: Executor._ReleasePool,
    RefreshCredentials: Executor._RefreshCredentials,
    Launch: Executor._Launch,
    MarkNodes: Executor._MarkNodes,
    Terminate: Executor._Terminate,
    Move: Executor._Move,
    RequestCancel: Executor._RequestCancel,
    Wait: Executor._Wait,
    CreateImage: Executor._CreateImage,
    ApplyImageRetention: Executor._ApplyImageRetention,
    DiscardImage: Executor._DiscardImage,
    RecordBill: Executor._RecordBill,
    RecordSuccess: Executor._RecordSuccess,
}
