"""Staging a job and starting its attempts: the bundle, the nodes' intents, the agents' configs and keys."""

from __future__ import annotations

import functools
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ...contract import (
    CredentialsDoc,
    RegistryToken,
    TemporaryKeys,
)
from ...plan.models import Placement
from ...providers.tencent import registry, sts
from ...providers.tencent.errors import AuthError, InvalidRequestError, NotFoundError
from ...providers.tencent.retry import retrying
from ...providers.tencent.vocabulary import ChargeType
from ...spec.container import image_host
from ...staging import agent_config, bundle
from ...staging.launch import client_token
from ...state.home import cvmjob_home
from ...state.machine import JobState, NodeState
from ...state.store import JobRecord, NodeRecord
from ..actions import (
    RefreshCredentials,
    ReleasePool,
    Stage,
    StartAttempt,
)
from ..observation import KeysRefused
from .base import CREDENTIAL_SECONDS, AgentKeysRefused, ExecutorBase, Next, PermanentFailure, keys_refusal, pool_holder


@dataclass(frozen=True)
class Issued:
    """What credentials.json holds for an attempt's agents."""

    keys: TemporaryKeys | None
    registry: RegistryToken | None

    @property
    def expires_at(self) -> int | None:
        """When the first of them expires (None: there are none)."""
        ends = [c.expires_at for c in (self.keys, self.registry) if c is not None]
        return min(ends) if ends else None


class Attempts(ExecutorBase):
    """Stage, StartAttempt, ReleasePool, RefreshCredentials."""

    def _stage(self, action: Stage) -> Next:
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

    def _start_attempt(self, action: StartAttempt) -> Next:
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
        issued = self._write_agent_configs(job, attempt, p)
        self.store.transition(
            self.job_id,
            self.token,
            job.state,
            JobState.LAUNCHING,
            f"attempt {attempt}: {p.label()} ({action.reason})",
            self.now(),
            attempt=attempt,
            **self._keys_on_record(issued),
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

    def _release_pool(self, action: ReleasePool) -> Next:
        for node in self.store.nodes(self.job_id):
            if node.instance_id in action.instance_ids and node.state != NodeState.RELEASED:
                self.pools.release(node.instance_id, pool_holder(node), self.now())
                released = replace(node, state=NodeState.RELEASED, ended_at=node.ended_at or self.now())
                self.store.put_node(self.token, released)
                self.emit("pool", f"gave {node.instance_id} back to the reserved pool")
        return Next.CONTINUE

    def _issue_keys(self) -> TemporaryKeys:
        granted = agent_config.grants(self.job_id, self.spec, self.plan)
        name = agent_config.federation_name(self.job_id)
        creds = retrying(lambda: sts.federation_token(self.sdk, name, self.target.appid, granted, CREDENTIAL_SECONDS))
        return TemporaryKeys(
            secret_id=creds.secret_id, secret_key=creds.secret_key, token=creds.token, expires_at=creds.expires_at
        )

    def _issue_registry_token(self) -> RegistryToken | None:
        """container.login.tcr: a temporary login to the enterprise instance, at the domain the image names."""
        container = self.spec.container
        registry_id = container.tcr if container is not None else None
        if container is None or registry_id is None:
            return None
        try:
            token = retrying(lambda: registry.instance_token(self.sdk, registry_id))
        except AuthError as exc:
            raise AgentKeysRefused(f"the cloud refused a login to the container registry {registry_id} "
                                   f"({exc.code}: {exc.message}); the controller's key needs the CAM action "
                                   "tcr:CreateInstanceToken") from exc
        except (NotFoundError, InvalidRequestError) as exc:
            raise PermanentFailure(f"container.login.tcr: {exc}") from exc
        return RegistryToken(registry=image_host(container.image), username=token.username, token=token.token,
                             expires_at=token.expires_at)

    def _write_credentials(self, attempt: int) -> Issued | None:
        """credentials.json of ``attempt``: the agents' short-lived COS keys (none with a CAM role) and the
        registry token of container.login.tcr; None when the agents need neither."""
        try:
            keys = None if self.spec.cam_role else self._issue_keys()
        except AuthError as exc:  # the job's own failure (or a retried refresh), never the controller's
            raise AgentKeysRefused(keys_refusal(exc)) from exc
        issued = Issued(keys, self._issue_registry_token())
        if issued.expires_at is None:
            return None
        self.keys_refused = None
        doc = CredentialsDoc(keys=issued.keys, registry=issued.registry).model_dump(mode="json")
        retrying(lambda: self.state.put_json(self.layout.credentials(attempt), doc))
        return issued

    def _write_agent_configs(self, job: JobRecord, attempt: int, placement: Placement) -> Issued | None:
        """Every node's agent.json of ``attempt`` on ``placement``; the credentials they carry (None with a CAM
        role and no registry token)."""
        issued = self._write_credentials(attempt)
        wanted = self.spec.checkpoints.resume_from
        if attempt == 1 and wanted is not None and self.plan.resume_from is None:  # latest-of: found no job then
            said = f"checkpoints.resume_from {wanted}: no such job had a complete checkpoint at plan time; starts fresh"
            self.store.note(self.job_id, self.token, "checkpoints", said, self.now())
            self.emit("checkpoints", said)
        layout = self.layout
        credentials_url = (
            None if issued is None
            else self.state.presigned_get_url(layout.credentials(attempt), self._presign_seconds(job))
        )
        configs = agent_config.agent_configs(self.job_id, self.spec, self.plan, self.target, attempt, placement,
                                             issued.keys if issued else None, credentials_url,
                                             issued.registry if issued else None)
        for config in configs:
            key, doc = layout.agent_config(attempt, config.node_rank), config.model_dump(mode="json")
            retrying(functools.partial(self.state.put_json, key, doc))
        return issued

    def _keys_on_record(self, issued: Issued | None) -> dict[str, Any]:
        """The job's columns that tell decide() when the agents' credentials were issued and when the first of
        them expires (it rotates them)."""
        if issued is None or issued.expires_at is None:
            return {}
        return {"keys_issued_at": self.now(), "keys_expire_at": float(issued.expires_at)}

    def _refresh_credentials(self, action: RefreshCredentials) -> Next:
        refused = self.keys_refused
        try:
            issued = self._write_credentials(self.job().attempt)
        except PermanentFailure as exc:  # refused, or the registry gone: the agents' credentials still last
            self._keys_refused(str(exc))
            return Next.CONTINUE
        self.store.update(self.job_id, self.token, self.now(), **self._keys_on_record(issued))
        what = " and ".join(name for name, given in (("COS keys", issued and issued.keys),
                                                     ("a registry token", issued and issued.registry)) if given)
        if refused is not None:
            self.store.note(self.job_id, self.token, "credentials",
                            f"new {what} issued to the agents after {refused.tries} refusal(s)", self.now())
        self.emit("credentials", f"issued fresh {what} to the agents ({action.reason})")
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
