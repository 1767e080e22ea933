"""STS actions: GetFederationToken, AssumeRole, AssumeRoleWithWebIdentity, GetCallerIdentity.

GetFederationToken works only with permanent keys and lasts 1800 s by default, at most 7200 s for a root
account; AssumeRole lasts 7200 s by default, at most 43200 s; both take a url-encoded CAM policy that narrows
the credential (shared/reference/tencent-cloud-api.md §7). AssumeRoleWithWebIdentity is sent unsigned
(``Authorization: SKIP``): its authority is the OIDC token it carries, and its keys have the role's policy
(https://cloud.tencent.com/document/product/1312/73070; the codes it answers are those the Go SDK's
sts/v20180813/client.go lists for it, except where models.py says why not).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any
from urllib.parse import unquote

from ..api3.dispatch import CallContext, Service
from ..api3.params import Params
from ..errors import ApiError
from ..iam import Iam, Policy, TemporaryCredential
from .models import WebIdentity

_ROLE_ARN = re.compile(r"^qcs::cam::uin/(?P<uin>\d+):role(?:Name)?/(?P<name>[\w+=,.@-]+)$")
_SESSION_NAME = re.compile(r"^[\w+=,.@-]{2,128}$")


def parse_policy(encoded: str | None) -> Policy | None:
    if encoded is None:
        return None
    if len(encoded) > 4096 * 3:
        raise ApiError("InvalidParameter.PolicyTooLong", "The policy is longer than allowed.")
    try:
        return Policy.parse(json.loads(unquote(encoded)))
    except (ValueError, TypeError, AttributeError) as exc:
        raise ApiError(
            "InvalidParameter.StrategyFormatError", f"The policy is not a valid CAM policy: {exc}."
        ) from None


def credential_payload(cred: TemporaryCredential) -> dict[str, Any]:
    return {
        "Credentials": {
            "Token": cred.token,
            "TmpSecretId": cred.secret_id,
            "TmpSecretKey": cred.secret_key,
        },
        "ExpiredTime": int(cred.expires_at),
        "Expiration": datetime.fromtimestamp(cred.expires_at, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }


def build(iam: Iam, web_identity: WebIdentity, now: Callable[[], float]) -> Service:
    service = Service("sts", "2018-08-13")

    def role_of(params: Params) -> tuple[str, str]:
        """RoleArn and the role's name, once RoleArn and RoleSessionName are well formed."""
        arn = params.req_str("RoleArn")
        match = _ROLE_ARN.match(arn)
        if not match:
            raise ApiError(
                "InvalidParameter.ParamError", f"RoleArn {arn!r} is not qcs::cam::uin/<uin>:roleName/<name>."
            )
        if match["uin"] != iam.uin:
            raise ApiError("ResourceNotFound.RoleNotFound", f"No role {match['name']} in account {match['uin']}.")
        session = params.req_str("RoleSessionName")
        if not _SESSION_NAME.match(session):
            raise ApiError("InvalidParameter.ParamError", "RoleSessionName must be 2-128 characters of [\\w+=,.@-].")
        return arn, match["name"]

    def duration(params: Params, default: int, maximum: int) -> int:
        seconds = params.int("DurationSeconds", default)
        assert seconds is not None
        if not 1 <= seconds <= maximum:
            raise ApiError(
                "InvalidParameter.OverTimeError",
                f"DurationSeconds must be between 1 and {maximum}, not {seconds}.",
            )
        return seconds

    @service.action("GetFederationToken")
    def get_federation_token(ctx: CallContext, params: Params) -> dict[str, Any]:
        if ctx.principal.temporary:
            raise ApiError(
                "FailedOperation.TempKeyNotAllowed", "GetFederationToken needs permanent keys, not a temporary key."
            )
        name = params.req_str("Name")
        if not re.fullmatch(r"[A-Za-z0-9_.-]{1,64}", name):
            raise ApiError("InvalidParameter.ParamError", f"Name {name!r} has characters that are not allowed.")
        seconds = duration(params, 1800, 7200)
        # A key narrowed like a sub-account's (iam.py) delegates at most what it may do itself.
        policy = Policy.intersect(parse_policy(params.str("Policy")), ctx.principal.policy)
        cred = iam.issue(seconds, now(), policy, f"GetFederationToken:{name}")
        return credential_payload(cred)

    @service.action("AssumeRole")
    def assume_role(ctx: CallContext, params: Params) -> dict[str, Any]:
        arn, _ = role_of(params)
        seconds = duration(params, 7200, 43200)
        # The issuer's own narrowing carries over: a token cannot assume its way out of its policy.
        policy = Policy.intersect(parse_policy(params.str("Policy")), ctx.principal.policy)
        cred = iam.issue(seconds, now(), policy, f"AssumeRole:{arn}")
        return credential_payload(cred)

    @service.action("AssumeRoleWithWebIdentity", unsigned=True)
    def assume_role_with_web_identity(ctx: CallContext, params: Params) -> dict[str, Any]:
        arn, name = role_of(params)
        # Too long a DurationSeconds answers OverTimeError, as for AssumeRole: the action's own list has only the
        # vaguer OverLimit, which says nothing of which limit.
        seconds = duration(params, 7200, 43200)
        claims = web_identity.verify(params.req_str("ProviderId"), params.req_str("WebIdentityToken"), now())
        role = web_identity.role(name, iam.uin)
        if not role.trusts(claims):
            raise ApiError(
                "UnauthorizedOperation",
                f"The role {name} does not trust this token (iss {claims.get('iss')!r}, sub {claims.get('sub')!r}).",
            )
        cred = iam.issue(seconds, now(), Policy.parse(role.policy), f"AssumeRoleWithWebIdentity:{arn}")
        return credential_payload(cred)

    @service.action("GetCallerIdentity", mutates=False)
    def get_caller_identity(ctx: CallContext, params: Params) -> dict[str, Any]:
        return {
            "Arn": f"qcs::cam::uin/{iam.uin}:uin/{iam.uin}",
            "AccountId": iam.uin,
            "UserId": iam.uin,
            "PrincipalId": iam.uin,
            "Type": "RootAccount" if not ctx.principal.temporary else "CAMUser",
        }

    return service
