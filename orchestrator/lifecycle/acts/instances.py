"""The instances of an attempt: launching them (RunInstances, or a pool member re-imaged), recording what became
of them, terminating them."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timezone

from ...providers.tencent import compute
from ...providers.tencent.errors import (
    CapacityError,
    CloudError,
    QuotaError,
    StateConflictError,
    TransientError,
)
from ...providers.tencent.retry import retrying
from ...providers.tencent.vocabulary import ChargeType
from ...staging import bootstrap
from ...staging.launch import launch_request, node_name, node_tags
from ...state.machine import NodeState
from ...state.store import JobRecord, NodeRecord
from ..actions import (
    Launch,
    MarkNodes,
    Terminate,
)
from ..recovery import QUOTA_REASON
from .base import ACTION_TIMER_MARGIN, ExecutorBase, Next, PermanentFailure


class Instances(ExecutorBase):
    """Launch, MarkNodes, Terminate."""

    def _launch_request(self, job: JobRecord, node: NodeRecord) -> compute.LaunchRequest:
        seconds = self._presign_seconds(job)
        data = bootstrap.for_launch(
            self.plan,
            node.instance_type,
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
            network=self.plan.network,
            terminate_at=datetime.fromtimestamp(max(job.deadline + ACTION_TIMER_MARGIN, self.now() + 420),
                                                timezone.utc),
        )

    def _launch(self, action: Launch) -> Next:
        job, node = self.job(), action.node
        request = self._launch_request(job, node)
        if node.charge_type == ChargeType.RESERVED:
            return self._reimage_pool_member(node, request)
        try:
            ids = retrying(lambda: compute.run_instances(self.sdk, request))
        except (CapacityError, QuotaError) as exc:
            quota = isinstance(exc, QuotaError)
            reason = f"{QUOTA_REASON if quota else ''}{exc.code}: {exc.message}"
            self.store.put_node(self.token, replace(node, state=NodeState.FAILED, end_reason=reason,
                                                    ended_at=self.now()))
            self.emit("capacity", f"{'the account quota refuses' if quota else 'no capacity for'} "
                      f"{request.instance_type} in {request.zone}: {exc.code}")
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

    def _mark_nodes(self, action: MarkNodes) -> Next:
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

    def _terminate(self, action: Terminate) -> Next:
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
