"""Reserved billing: a pool of prepaid (包年包月) instances the team already pays for.

A pool is the set of instances tagged ``cvmjob:pool=<name>``; the state store records which job holds which one.
A reserved job claims an idle member of a matching type and zone, re-images it (ResetInstance with the job's
image and UserData: the system disk starts clean and the agent starts), runs, and gives it back. A job never
terminates a pool instance; ``cvmjob pool shrink`` does, under Tencent's prepaid rules: TerminateInstances
moves a prepaid instance to the recycle bin, and a refund depends on the account's self-service return quota
(https://www.tencentcloud.com/document/product/213/9711).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from ..contract.tags import TAG_MANAGED, TAG_OWNER, TAG_POOL, owner
from ..errors import EXIT_CLOUD_ERROR, CvmjobError
from ..plan.models import Placement, PlannedNetwork
from ..plan.planner import PublicImage, default_image
from ..providers.tencent import TencentSdk, compute, images, network
from ..providers.tencent.errors import CloudError
from ..providers.tencent.vocabulary import ChargeType, InstanceState
from ..staging.launch import launch_request
from ..state.store import PoolInstance, PoolStore
from . import funds


class PoolError(CvmjobError):
    """The pool cannot do what was asked (a busy member, a refused purchase or return)."""

    exit_code = EXIT_CLOUD_ERROR


@dataclass(frozen=True)
class Member:
    instance_id: str
    zone: str
    instance_type: str
    state: InstanceState
    job_id: str | None
    expires_at: datetime | None


def sync(pools: PoolStore, sdk: TencentSdk, pool: str | None, now: float) -> list[Member]:
    """The pool as the cloud sees it, with the store's claims; the store learns of new members and forgets
    released ones (only when the lookup succeeded: a failed lookup never removes anything)."""
    tagged = [i for i in compute.find_by_tag_key(sdk, TAG_POOL) if pool is None or i.tags.get(TAG_POOL) == pool]
    known = {m.instance_id: m for m in pools.members(pool)}
    live = {i.instance_id: i for i in tagged if i.state.usable}
    for instance in live.values():
        if instance.instance_id not in known:
            pools.add(
                PoolInstance(
                    instance.instance_id, instance.tags[TAG_POOL], instance.zone, instance.instance_type, None, now
                )
            )
    for instance_id in set(known) - set(live):
        pools.remove(instance_id)
    claims = {m.instance_id: m.job_id for m in pools.members(pool)}
    return [
        Member(i.instance_id, i.zone, i.instance_type, i.state, claims.get(i.instance_id), i.expires_at)
        for i in sorted(live.values(), key=lambda i: i.instance_id)
    ]


def _pool_network(sdk: TencentSdk, zone: str) -> PlannedNetwork:
    """Members sit where the region's jobs do: the default VPC's subnet in ``zone``, cvmjob's security group (a
    job re-images a member and keeps its network)."""
    vpc = network.default_vpc(sdk)
    subnet = next((s for s in network.subnets(sdk, vpc) if s.zone == zone and s.is_default), None) if vpc else None
    if vpc is None or subnet is None:
        raise PoolError(f"{zone} has no default subnet in this account: create the region's default VPC first")
    group, _ = network.ensure_security_group(sdk, TAG_MANAGED)
    return PlannedNetwork(vpc_id=vpc, subnets={zone: subnet.subnet_id}, security_group_ids=[group])


def grow(
    pools: PoolStore,
    sdk: TencentSdk,
    pool: str,
    zone: str,
    instance_type: str,
    image_id: str | None,
    count: int,
    months: int,
    auto_renew: bool,
    now: Callable[[], float] = time.time,
    wait_seconds: float = 900,
    warn: Callable[[str], None] = lambda line: None,
    confirm: Callable[[str], None] = lambda cost: None,
) -> list[str]:
    """Buy ``count`` prepaid instances into the pool and wait until they run, if the account's balance covers
    their period (``warn`` says so when it cannot be read). ``image_id`` None: the image the planner would give
    a job on this type. ``confirm`` is told the price before anything is bought (it may stop the purchase)."""
    request = launch_request(
        None,
        Placement(zone=zone, instance_type=instance_type, charge_type=ChargeType.RESERVED),
        image_id or _default_image(sdk, zone, instance_type),
        client_token=f"cvmjob-pool-{uuid.uuid4().hex[:32]}",
        name=f"cvmjob-pool-{pool}",
        tags={TAG_POOL: pool, TAG_OWNER: owner()},
        prepaid_months=months,
        prepaid_renew=auto_renew,
        count=count,
        network=_pool_network(sdk, zone),
    )
    price = compute.inquiry_price(sdk, request)  # of all ``count`` for the whole period, paid at purchase
    need = None if price.upfront is None else funds.Need(price.upfront, f"{months} month(s), paid at purchase",
                                                         "buy fewer instances or months")
    funds.ensure(sdk, f"buying {count} × {instance_type} in {zone}", need, warn)
    upfront = "price not known" if price.upfront is None else f"¥{price.upfront:,.2f}"
    confirm(f"{count} x {instance_type} in {zone} for {months} month(s), paid now: {upfront}"
            + (", renewed automatically" if auto_renew else ""))
    ids = compute.run_instances(sdk, request)
    for instance_id in ids:
        pools.add(PoolInstance(instance_id, pool, zone, instance_type, None, now()))
    deadline = now() + wait_seconds
    while True:
        states = {i.instance_id: i.state for i in compute.describe(sdk, ids).values()}
        failed = [i for i, s in states.items() if s.never_ran]
        if failed:
            raise PoolError(f"{', '.join(failed)} failed to launch; the others joined the pool")
        if all(states.get(i) == InstanceState.RUNNING for i in ids):
            return ids
        if now() > deadline:
            raise PoolError(f"the new instances are not RUNNING after {wait_seconds:.0f} s: {states}")
        time.sleep(1)


def _default_image(sdk: TencentSdk, zone: str, instance_type: str) -> str:
    offers = compute.offerings(sdk, [zone], [instance_type], ChargeType.RESERVED)
    if not offers:
        raise PoolError(f"{instance_type} is not sold prepaid in {zone}: check --type and --zone")
    image = default_image([PublicImage(i.image_id, i.name) for i in images.public(sdk)])
    if image is None:
        raise PoolError(f"no public image in {sdk.region} to boot the pool with: pass --image")
    return image.image_id


def shrink(pools: PoolStore, sdk: TencentSdk, pool: str, count: int, now: float) -> list[str]:
    """Return ``count`` idle members (busy ones are never touched)."""
    idle = [m for m in sync(pools, sdk, pool, now) if m.job_id is None and m.state == InstanceState.RUNNING]
    if len(idle) < count:
        raise PoolError(f"pool {pool} has {len(idle)} idle instance(s); a busy one is never returned")
    chosen = [m.instance_id for m in idle[:count]]
    try:
        compute.terminate(sdk, chosen)
    except CloudError as exc:
        raise PoolError(
            f"Tencent Cloud refused to return the instances ({exc.code}: {exc.message}); prepaid "
            "instances can be returned only within the account's self-service return quota"
        ) from exc
    for instance_id in chosen:
        pools.remove(instance_id)
    return chosen
