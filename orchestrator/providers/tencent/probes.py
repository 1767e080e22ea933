"""Whether the keys may make each call cvmjob makes, asked without changing anything (`cvmjob doctor`): a read, a
DryRun, or a write naming a resource that does not exist (CAM decides before the resource is looked up, so such a
call answers "not found" when allowed and UnauthorizedOperation when not). What cannot be asked so is said."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from enum import Enum

from . import billing, buckets, compute, errors, images, network, registry, sts
from ._sdk import TencentSdk

NO_INSTANCE = "ins-00000000"  # ids of the documented form that name nothing
NO_IMAGE = "img-00000000"
NO_GROUP = "sg-00000000"
NO_REGISTRY = "tcr-00000000"


class Answer(Enum):
    ALLOWED = "allowed"
    DENIED = "denied"
    UNASKED = "not asked"  # no call asks it without changing something


@dataclass(frozen=True)
class Probing:
    """What the probes need: a launch the DryRun and the price inquiry ask about, the state bucket the STS probe
    scopes its keys to."""

    launch: compute.LaunchRequest
    appid: str
    state_bucket: str


@dataclass(frozen=True)
class Probed:
    action: str  # as CAM names it, without "name/"
    answer: Answer
    detail: str = ""  # the refusal, or why it was not asked

    @property
    def needed_by(self) -> str | None:
        """The jobs that need the action, when not all do."""
        return OPTIONAL.get(self.action)


def _terminate(sdk: TencentSdk, p: Probing) -> None:
    sdk.call("cvm", "TerminateInstances", {"InstanceIds": [NO_INSTANCE]})


def _reset(sdk: TencentSdk, p: Probing) -> None:
    sdk.call("cvm", "ResetInstance", {"InstanceId": NO_INSTANCE, "ImageId": p.launch.image_id})


def _capture(sdk: TencentSdk, p: Probing) -> None:
    sdk.call("cvm", "CreateImage", {"InstanceId": NO_INSTANCE, "ImageName": "cvmjob-doctor"})


def _delete_images(sdk: TencentSdk, p: Probing) -> None:
    sdk.call("cvm", "DeleteImages", {"ImageIds": [NO_IMAGE]})


def _group_rules(sdk: TencentSdk, p: Probing) -> None:
    sdk.call("vpc", "DescribeSecurityGroupPolicies", {"SecurityGroupId": NO_GROUP})


def _add_rules(sdk: TencentSdk, p: Probing) -> None:
    sdk.call("vpc", "CreateSecurityGroupPolicies", {"SecurityGroupId": NO_GROUP, "SecurityGroupPolicySet": {
        "Egress": [{"Protocol": "ALL", "CidrBlock": "0.0.0.0/0", "Action": "ACCEPT"}]}})


def _federation(sdk: TencentSdk, p: Probing) -> None:
    sts.federation_token(sdk, "cvmjob-doctor", p.appid, [sts.Grant(p.state_bucket, "cvmjob/_doctor/", False)],
                         duration_seconds=900)


def _bill(sdk: TencentSdk, p: Probing) -> None:
    billing.resource_cost(sdk, NO_INSTANCE, datetime.now(timezone.utc))


def _vpcs(sdk: TencentSdk, p: Probing) -> None:
    network.default_vpc(sdk)


def _subnets(sdk: TencentSdk, p: Probing) -> None:
    network.subnets(sdk, "vpc-00000000")


def _groups(sdk: TencentSdk, p: Probing) -> None:
    network.security_groups(sdk, [NO_GROUP])


PROBES: dict[str, Callable[[TencentSdk, Probing], object]] = {
    "cvm:DescribeZones": lambda sdk, p: compute.zones(sdk),
    "cvm:DescribeZoneInstanceConfigInfos": lambda sdk, p: compute.offerings(
        sdk, [p.launch.zone], [p.launch.instance_type], p.launch.charge_type),
    "cvm:DescribeAccountQuota": lambda sdk, p: compute.spot_quotas(sdk, [p.launch.zone]),
    "cvm:DescribeHpcClusters": lambda sdk, p: compute.hpc_clusters(sdk),
    "cvm:DescribeImages": lambda sdk, p: images.describe(sdk, [p.launch.image_id]),
    "cvm:DescribeInstances": lambda sdk, p: compute.describe(sdk, [NO_INSTANCE]),
    "cvm:InquiryPriceRunInstances": lambda sdk, p: compute.inquiry_price(sdk, p.launch),
    "cvm:RunInstances": lambda sdk, p: compute.dry_run(sdk, p.launch),
    "cvm:TerminateInstances": _terminate,
    "cvm:ResetInstance": _reset,
    "cvm:CreateImage": _capture,
    "cvm:DeleteImages": _delete_images,
    "vpc:DescribeVpcs": _vpcs,
    "vpc:DescribeSubnets": _subnets,
    "vpc:DescribeSecurityGroups": _groups,
    "vpc:DescribeSecurityGroupPolicies": _group_rules,
    "vpc:CreateSecurityGroupPolicies": _add_rules,
    "sts:GetFederationToken": _federation,
    "billing:DescribeAccountBalance": lambda sdk, p: billing.account_balance(sdk),
    "billing:DescribeBillResourceSummary": _bill,
    "cos:GetService": lambda sdk, p: buckets.regions(sdk),
    "tcr:CreateInstanceToken": lambda sdk, p: registry.instance_token(sdk, NO_REGISTRY),
    "tcr:DescribeInternalEndpoints": lambda sdk, p: registry.linked_vpcs(sdk, NO_REGISTRY),
}
# Needed by some jobs only: a refusal is said, and does not stop the others.
OPTIONAL = {
    "tcr:CreateInstanceToken": "jobs whose container.login names a registry with tcr: <instance id>",
    "tcr:DescribeInternalEndpoints": "jobs whose container.login names a registry with tcr: <instance id>",
}
# Writes with no harmless form: when each is needed, and what takes its place meanwhile.
UNASKED = {
    "vpc:CreateSecurityGroup": "no call asks it without creating a group: needed once, by the first plan of a "
                               "region without cvmjob's security group",
    "vpc:CreateDefaultVpc": "no call asks it without creating a VPC: needed only in a region without a default VPC",
    "cam:PassRole": "no call asks it: needed to launch with credentials: role:<instance role>",
}


def probe(sdk: TencentSdk, action: str, probing: Probing) -> Probed:
    """Whether the keys may call ``action``: any answer but a refusal of the keys' rights says they may."""
    if action in UNASKED:
        return Probed(action, Answer.UNASKED, UNASKED[action])
    try:
        PROBES[action](sdk, probing)
    except errors.ExpiredCredentialError:
        raise
    except errors.AuthError as exc:
        return Probed(action, Answer.DENIED, " ".join(f"{exc.code}: {exc.message}".split()))  # one line
    except errors.CloudError:
        pass  # not found, a parameter, stock, a quota: the call was let through
    return Probed(action, Answer.ALLOWED)
