"""What a job leaves on record when it ends: its bill, its success for CI and `run --if-changed`."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timezone

from ...ci import fingerprint
from ...ci.facts import run_facts
from ...contract import (
    Fingerprint,
    FingerprintEntry,
    Result,
    Status,
    Unread,
    latest_key,
)
from ...providers.tencent import billing
from ...providers.tencent.errors import CloudError
from ...providers.tencent.retry import retrying
from ...providers.tencent.vocabulary import ChargeType
from ...staging import agent_config
from ...state.machine import JobState, NodeState
from ...state.store import JobRecord, NodeRecord
from ..actions import (
    RecordBill,
    RecordSuccess,
)
from ..observe import read_node_doc
from .base import ExecutorBase, Next


class Records(ExecutorBase):
    """RecordBill, RecordSuccess."""

    def _record_bill(self, action: RecordBill) -> Next:
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

    def _record_success(self, action: RecordSuccess) -> Next:
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
        now_listed = retrying(lambda: fingerprint.data_digests(self.spec, self.sdk, self.plan.bucket_regions))
        changed = fingerprint.changed_data(taken, now_listed)
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
