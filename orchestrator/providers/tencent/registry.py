"""Tencent Container Registry, enterprise edition: a temporary login to an instance for the nodes' ``docker login``.

CreateInstanceToken(RegistryId, TokenType=temp) answers a username and a token valid for one hour, and ``ExpTime``,
"a timestamp ... without unit" (https://www.tencentcloud.com/document/product/1051/45154; SDK-TCR models:
"临时访问凭证，有效期1小时"). The instance is regional: the token is asked in the job's region.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from . import errors
from ._sdk import TencentSdk

_NOT_FOUND = ("ResourceNotFound", "InvalidParameter.ErrorRegistryNotExist")


@dataclass(frozen=True)
class InstanceToken:
    username: str
    token: str
    expires_at: int  # seconds since the epoch


def _call(sdk: TencentSdk, action: str, params: dict[str, Any]) -> dict[str, Any]:
    """A TCR call about one instance; NotFoundError, naming it and the region, when the region has no such one."""
    try:
        return sdk.call("tcr", action, params)
    except errors.CloudError as exc:
        if exc.code.startswith(_NOT_FOUND):
            raise errors.NotFoundError(exc.code, f"{sdk.region} has no container registry {params['RegistryId']} "
                                                 f"(container.login.tcr): {exc.message}", exc.request_id) from exc
        raise


def instance_token(sdk: TencentSdk, registry_id: str) -> InstanceToken:
    """A temporary login to the enterprise instance ``registry_id``."""
    result = _call(sdk, "CreateInstanceToken", {"RegistryId": registry_id, "TokenType": "temp"})
    return InstanceToken(str(result["Username"]), str(result["Token"]), _seconds(int(result["ExpTime"])))


def _seconds(exp_time: int) -> int:
    """ExpTime's unit is not documented: seconds, or milliseconds once it is past any date in seconds."""
    return exp_time // 1000 if exp_time > 10**11 else exp_time


def linked_vpcs(sdk: TencentSdk, registry_id: str) -> set[str]:
    """The VPCs with private access to the enterprise instance (DescribeInternalEndpoints' AccessVpcSet), the only
    way an instance without a public IP reaches it; those whose link failed or is going away left out."""
    result = _call(sdk, "DescribeInternalEndpoints", {"RegistryId": registry_id})
    return {str(a["VpcId"]) for a in result.get("AccessVpcSet") or []
            if not any(word in str(a.get("Status", "")).lower() for word in ("fail", "delet"))}
