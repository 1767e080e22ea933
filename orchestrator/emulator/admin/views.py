"""What the admin API shows of CVM's insides: each instance with its sandbox and processes, spot notices."""

from __future__ import annotations

from typing import Any

from ..cvm.models import Cvm
from ..cvm.records import Instance
from ..cvm.times import cst_text


def spot(rec: Instance) -> dict[str, Any]:
    return {
        "instance_id": rec.instance_id,
        "random_notice_at": rec.random_notice_at,
        "notice_at": rec.notice_at,
        "reclaim_at": rec.reclaim_at,
        "termination_time": cst_text(rec.reclaim_at) if rec.notice_at is not None and rec.reclaim_at else None,
    }


def instances(cvm: Cvm, endpoint: str, processes: bool = True) -> list[dict[str, Any]]:
    """Live instances, then released ones whose processes the host still knows of; without ``processes``, their
    pid, pgid and alive are None (no pass over /proc)."""
    # RunInstances' ClientToken of each instance: a load test matches launches to its jobs' tokens.
    tokens = {i: token for token, ids in cvm.client_tokens.items() for i in ids}
    runtime = cvm.host.describe(
        {**{g: 0 for g in cvm.gone}, **{i: rec.local_disks for i, rec in cvm.instances.items()}}, processes
    )
    live = [
        {
            **spot(rec),
            "state": rec.state,
            "region": rec.region,
            "zone": rec.zone,
            "instance_type": rec.instance_type,
            "charge_type": rec.charge_type,
            "private_ip": rec.vpc_ip,
            "tags": {t["Key"]: t["Value"] for t in rec.tags},
            "gpus": rec.gpus,
            "boots_pending": rec.boot_pending,
            "created_at": rec.created_at,
            "client_token": tokens.get(rec.instance_id),
            "first_running_at": rec.first_running_at,
            # The instance's HTTP_PROXY: with it a test or tool reaches the metadata service as the instance.
            "proxy": f"http://{rec.instance_id}:{rec.secret}@{endpoint}",
            **runtime[rec.instance_id],
        }
        for rec in cvm.instances.values()
    ]
    gone = [
        {"instance_id": g.instance_id, "state": "TERMINATED", "region": g.region, "gone_at": g.gone_at,
         **runtime[g.instance_id]}
        for g in cvm.gone.values()
    ]
    return live + gone
