"""Short-lived credentials: an instance's, scoped to the COS prefixes its job may touch, and a web identity's.

GetFederationToken lasts at most 7200 s for a root account (tencent-cloud-api.md §7); the controller refreshes
them while the job runs. The policy follows https://cloud.tencent.com/document/product/436/30580 .
AssumeRoleWithWebIdentity trades an OIDC token for a role's keys, unsigned
(https://cloud.tencent.com/document/product/1312/73070).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

if TYPE_CHECKING:
    from ._sdk import TencentSdk

OBJECT_ACTIONS = [
    "name/cos:PutObject",
    "name/cos:PostObject",
    "name/cos:GetObject",
    "name/cos:HeadObject",
    "name/cos:DeleteObject",
    "name/cos:InitiateMultipartUpload",
    "name/cos:ListMultipartUploads",
    "name/cos:ListParts",
    "name/cos:UploadPart",
    "name/cos:CompleteMultipartUpload",
    "name/cos:AbortMultipartUpload",
]
READ_ACTIONS = ["name/cos:GetObject", "name/cos:HeadObject"]


@dataclass(frozen=True)
class Grant:
    bucket: str
    prefix: str
    write: bool
    region: str | None = None  # the bucket's, when not the keys' own region (network.allow_cross_region)


@dataclass(frozen=True)
class TemporaryCredentials:
    secret_id: str
    secret_key: str
    token: str
    expires_at: int


def cos_policy(region: str, appid: str, grants: list[Grant]) -> dict[str, object]:
    statements: list[dict[str, object]] = []
    for g in grants:
        where = g.region or region
        resource = f"qcs::cos:{where}:uid/{appid}:{g.bucket}/{g.prefix}*"
        statements.append(
            {"effect": "allow", "action": OBJECT_ACTIONS if g.write else READ_ACTIONS, "resource": [resource]}
        )
        statements.append(
            {
                "effect": "allow",
                "action": ["name/cos:GetBucket", "name/cos:HeadBucket"],
                "resource": [f"qcs::cos:{where}:uid/{appid}:{g.bucket}/*"],
                "condition": {"string_like": {"cos:prefix": f"{g.prefix}*"}},
            }
        )
    return {"version": "2.0", "statement": statements}


def _temporary(result: dict[str, Any]) -> TemporaryCredentials:
    creds = result["Credentials"]
    return TemporaryCredentials(creds["TmpSecretId"], creds["TmpSecretKey"], creds["Token"], int(result["ExpiredTime"]))


def federation_token(
    sdk: TencentSdk, name: str, appid: str, grants: list[Grant], duration_seconds: int = 7200
) -> TemporaryCredentials:
    policy = cos_policy(sdk.region, appid, grants)
    result = sdk.call(
        "sts",
        "GetFederationToken",
        {"Name": name, "Policy": quote(json.dumps(policy)), "DurationSeconds": duration_seconds},
    )
    return _temporary(result)


def web_identity_keys(
    sdk: TencentSdk, provider_id: str, token: str, role_arn: str, session_name: str, duration_seconds: int
) -> TemporaryCredentials:
    params = {
        "ProviderId": provider_id,
        "WebIdentityToken": token,
        "RoleArn": role_arn,
        "RoleSessionName": session_name,
        "DurationSeconds": duration_seconds,
    }
    return _temporary(sdk.call("sts", "AssumeRoleWithWebIdentity", params, unsigned=True))
