"""TCR 2019-09-24: CreateInstanceToken, the temporary (or long-term) login to an enterprise instance, and the VPCs'
private access to it (ManageInternalEndpoint, DescribeInternalEndpoints).

CreateInstanceToken as documented (https://www.tencentcloud.com/document/product/1051/45154): RegistryId
(required), TokenType (temp, the default, or longterm), Desc; Username, Token, ExpTime, TokenId (long-term only).
ExpTime is "a timestamp ... without unit": the emulator answers seconds. ManageInternalEndpoint(RegistryId,
Operation Create|Delete, VpcId, SubnetId) (https://cloud.tencent.com/document/api/1141/50733);
DescribeInternalEndpoints(RegistryId) answers AccessVpcSet (VpcId, SubnetId, Status, AccessIp) and TotalCount.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..api3.dispatch import CallContext, Service
from ..api3.params import Params
from ..errors import ApiError
from ..ids import new_id
from .enterprise import Enterprise


def build(enterprise: Enterprise, now: Callable[[], float], subnet_in: Callable[[str, str], bool]) -> Service:
    """``subnet_in(vpc, subnet)``: whether the account's VPC has that subnet."""
    service = Service("tcr", "2019-09-24")

    @service.action("ManageInternalEndpoint")
    def manage_internal_endpoint(ctx: CallContext, params: Params) -> dict[str, Any]:
        registry_id, operation = params.req_str("RegistryId"), params.req_str("Operation")
        vpc_id, subnet_id = params.req_str("VpcId"), params.req_str("SubnetId")
        if operation not in ("Create", "Delete"):
            raise ApiError("InvalidParameter", f"Operation must be Create or Delete, not {operation!r}.")
        enterprise.instance(registry_id, ctx.region)
        if operation == "Create" and not subnet_in(vpc_id, subnet_id):
            raise ApiError("InvalidParameter", f"The subnet `{subnet_id}` of `{vpc_id}` does not exist.")
        enterprise.link(registry_id, ctx.region, vpc_id, subnet_id, create=operation == "Create")
        return {"RegistryId": registry_id}

    @service.action("DescribeInternalEndpoints", mutates=False)
    def describe_internal_endpoints(ctx: CallContext, params: Params) -> dict[str, Any]:
        registry_id = enterprise.instance(params.req_str("RegistryId"), ctx.region).registry_id
        linked = enterprise.links.get(registry_id, {})
        access = [{"VpcId": vpc, "SubnetId": subnet, "Status": "Running", "AccessIp": _access_ip(vpc)}
                  for vpc, subnet in sorted(linked.items())]
        return {"AccessVpcSet": access, "TotalCount": len(access)}

    @service.action("CreateInstanceToken")
    def create_instance_token(ctx: CallContext, params: Params) -> dict[str, Any]:
        token_type = params.str("TokenType", "temp") or "temp"
        params.str("Desc")
        token, value = enterprise.issue(params.req_str("RegistryId"), ctx.region, token_type, now())
        answer: dict[str, Any] = {"Username": token.username, "Token": value, "ExpTime": int(token.expires)}
        answer["TokenId"] = new_id("tk") if token_type == "longterm" else None
        return answer

    return service


def _access_ip(vpc_id: str) -> str:
    """The link's address in the VPC (the emulator routes nothing to it: the proxy answers the domain)."""
    return f"172.16.255.{sum(vpc_id.encode()) % 250 + 2}"
