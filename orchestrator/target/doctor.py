"""`cvmjob doctor`: whether this machine's keys could run a job in a region, asked before anything is spent. Each
check is one line with its fix; nothing is created (the permissions are probed with reads, a DryRun, or writes on
resources that do not exist: providers/tencent/probes.py)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from ..contract.tags import TAG_MANAGED
from ..plan.images import too_old
from ..plan.models import Placement, PlannedNetwork
from ..plan.planner import PublicImage, default_image
from ..providers.tencent import TencentSdk, billing, buckets, compute, images, network, probes
from ..providers.tencent.errors import AuthError
from ..providers.tencent.vocabulary import ChargeType
from ..staging.launch import launch_request
from . import Target

T = TypeVar("T")
POLICY = "docs/cam/controller.json"  # the minimal policy of the controller's keys, in the repository


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str
    fix: str = ""


def run_checks(target: Target, sdk: TencentSdk, state_bucket: str) -> list[Check]:
    """Every check, in the order a job meets them; after keys the cloud refuses, nothing else is asked."""
    checks = [Check("credentials", True, f"keys from {target.credential_source or 'the emulator'}, APPID "
                    f"{target.appid}")]
    try:
        zones = [z for z, up in compute.zones(sdk) if up and z.rpartition("-")[0] == target.region]
    except AuthError as exc:
        return [Check("credentials", False, f"the cloud refuses the keys ({exc.code}: {exc.message})",
                      "set TENCENTCLOUD_SECRET_ID and TENCENTCLOUD_SECRET_KEY to a sub-account's keys "
                      f"with the policy of {POLICY}")]
    if not zones:
        return [*checks, Check("region", False, f"{target.region} has no available zone",
                               "check the region's name (e.g. ap-guangzhou) with --region")]
    checks.append(Check("region", True, f"{target.region}: zones {', '.join(zones)}"))
    # A read the keys may not make leaves its part unknown here; its permission line below says which.
    offers: list[compute.Offering] = _read(lambda: compute.offerings(sdk, zones, None, ChargeType.ON_DEMAND), [])
    image = _read(lambda: default_image([PublicImage(i.image_id, i.name) for i in images.public(sdk)
                                         if too_old(i.os_name) is None]), None)
    checks.append(_image_check(image, offers) if offers else Check("image", False, "could not be read", _SEE))
    vpc = _read(lambda: network.default_vpc(sdk), None)
    group = _read(lambda: network.managed_security_group(sdk, TAG_MANAGED), None)
    checks.append(_guarded("network", lambda: _network_check(sdk, target.region, vpc, group, zones)))
    if image is not None and offers:
        smallest = min((o for o in offers if o.on_sale), key=lambda o: (o.cpu, o.instance_type), default=offers[0])
        subnet = _read(lambda: _subnet_of(sdk, vpc, smallest.zone), None)
        request = launch_request(
            None, Placement(zone=smallest.zone, instance_type=smallest.instance_type,
                            charge_type=ChargeType.ON_DEMAND), image.image_id,
            client_token="cvmjob-doctor", name="cvmjob-doctor", tags={},
            network=None if vpc is None or subnet is None else PlannedNetwork(
                vpc_id=vpc, subnets={smallest.zone: subnet}, security_group_ids=[group] if group else []))
        probing = probes.Probing(request, target.appid, state_bucket)
        checks += [_permission(probes.probe(sdk, action, probing)) for action in [*probes.PROBES, *probes.UNASKED]]
    checks.append(_guarded("balance", lambda: _balance(sdk)))
    checks.append(_guarded("spot quota", lambda: _spot_quota(sdk, zones)))
    checks.append(_guarded("on-demand quota", lambda: _on_demand_quota(sdk, zones)))
    checks.append(_guarded("state bucket", lambda: _state_bucket(sdk, target.region, state_bucket)))
    return checks


_SEE = f"see the permission lines; {POLICY}"


def _guarded(name: str, check: Callable[[], Check]) -> Check:
    """A check whose call the keys may not make: its permission line says which, this one that it is unknown."""
    try:
        return check()
    except AuthError as exc:
        return Check(name, False, f"could not be read ({exc.code})", _SEE)


def _read(read: Callable[[], T], unknown: T) -> T:
    try:
        return read()
    except AuthError:
        return unknown


def _image_check(image: PublicImage | None, offers: list[compute.Offering]) -> Check:
    if image is None:
        return Check("image", False, "no public image here runs the agent (python3 3.10 or newer)",
                     "set image.id in the spec to an image with python3 >= 3.10")
    gpu_families = sorted({o.family for o in offers if o.gpu_count >= 1})
    return Check("image", True, f"{image.name} ({image.image_id}) for every family; "
                 f"{', '.join(gpu_families) or 'no GPU family here'}: the GPU driver installs at boot")


def _subnet_of(sdk: TencentSdk, vpc: str | None, zone: str) -> str | None:
    found = [s for s in network.subnets(sdk, vpc) if s.zone == zone] if vpc else []
    return min(found, key=lambda s: (not s.is_default, s.subnet_id)).subnet_id if found else None


def _network_check(sdk: TencentSdk, region: str, vpc: str | None, group: str | None, zones: list[str]) -> Check:
    if vpc is None:
        return Check("network", True, f"{region} has no default VPC yet: the first plan creates it "
                     "(vpc:CreateDefaultVpc), or set network.vpc_id in the spec")
    covered = sorted({s.zone for s in network.subnets(sdk, vpc)} & set(zones))
    said = f"default VPC {vpc}, subnets in {', '.join(covered) or 'no zone'}"
    said += f"; cvmjob's security group {group}" if group else \
        "; cvmjob's security group does not exist yet: the first plan creates it (vpc:CreateSecurityGroup)"
    return Check("network", True, said)


def _permission(probed: probes.Probed) -> Check:
    name = f"permission {probed.action}"
    fix = f"add name/{probed.action} to the keys' policy (see {POLICY})"
    if probed.answer == probes.Answer.DENIED and probed.needed_by is not None:
        return Check(name, True, f"refused ({probed.detail}); needed only by {probed.needed_by}: {fix}")
    if probed.answer == probes.Answer.DENIED:
        return Check(name, False, f"refused ({probed.detail})", fix)
    return Check(name, True, probed.answer.value + (f": {probed.detail}" if probed.detail else ""))


def _balance(sdk: TencentSdk) -> Check:
    balance = billing.account_balance(sdk)
    if balance.available <= 0:
        return Check("balance", False, f"{balance.available:.2f} CNY available ({balance.owed:.2f} owed)",
                     "top the account up: Tencent refuses pay-as-you-go and spot purchases without funds")
    return Check("balance", True, f"{balance.available:.2f} CNY available")


def _spot_quota(sdk: TencentSdk, zones: list[str]) -> Check:
    """Whether some zone's spot quota (vCPUs) holds some GPU type offered there on spot."""
    quotas = compute.spot_quotas(sdk, zones)
    offers = [o for o in compute.offerings(sdk, zones, None, ChargeType.SPOT) if o.gpu_count >= 1 and o.on_sale]
    fits = {z: sorted(o.instance_type for o in offers if o.zone == z and o.cpu <= q.remaining)
            for z, q in quotas.items()}
    said = "; ".join(f"{z}: {q.remaining} of {q.total} vCPU free" for z, q in sorted(quotas.items()))
    if offers and not any(fits.values()):
        smallest = min(offers, key=lambda o: o.cpu)
        return Check("spot quota", False, f"{said}: no GPU type fits (the smallest, {smallest.instance_type}, needs "
                     f"{smallest.cpu})", "ask Tencent for more spot quota by ticket, or use billing.mode: on-demand")
    biggest = {z: max(names, key=lambda n: next(o.cpu for o in offers if o.instance_type == n))
               for z, names in fits.items() if names}
    largest = ", ".join(f"{z} holds up to {t}" for z, t in sorted(biggest.items()))
    return Check("spot quota", True, f"{said}" + (f" ({largest})" if largest else ""))


def _on_demand_quota(sdk: TencentSdk, zones: list[str]) -> Check:
    """Whether some zone's pay-as-you-go quota (instances) has room for one more."""
    quotas = compute.on_demand_quotas(sdk, zones)
    said = "; ".join(f"{z}: {q.remaining} of {q.total} instances free" for z, q in sorted(quotas.items()))
    if quotas and not any(q.remaining > 0 for q in quotas.values()):
        return Check("on-demand quota", False, said, "terminate instances you no longer need, or ask Tencent for a "
                     "higher pay-as-you-go quota by ticket")
    return Check("on-demand quota", True, said or "not reported")


def _state_bucket(sdk: TencentSdk, region: str, bucket: str) -> Check:
    where = buckets.regions(sdk).get(bucket)
    if where is None:
        return Check("state bucket", True, f"{bucket} does not exist yet: the first job creates it in {region}")
    if where != region:
        return Check("state bucket", False, f"{bucket} is in {where}, and the instances of {region} reach COS of "
                     "their own region only", f"unset CVMJOB_STATE_BUCKET (cvmjob then uses its region's own), or "
                     f"name a bucket of {region}")
    return Check("state bucket", True, f"{bucket} ({region})")


def could_run_a_job(checks: list[Check]) -> bool:
    return all(c.ok for c in checks)

