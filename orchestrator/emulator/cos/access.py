"""Who may do what: the caller behind a verified signature, and CAM resource names for COS.

Temporary credentials (STS, instance roles) must present their token in ``x-cos-security-token`` and be unexpired
on the cloud clock; their CAM policy (and the long-term key's, once the admin API gave it one: iam.py) is then
enforced per operation with actions ``name/cos:<Operation>`` on
``qcs::cos:<region>:uid/<appid>:<bucket>/<key>`` (shared/reference/tencent-cloud-api.md §7, doc 436/30580).
"""

from __future__ import annotations

import hmac

from ..errors import CosError
from ..iam import Iam, Principal
from .signing import SignedRequest


def principal_for(iam: Iam, signed: SignedRequest, now: float) -> Principal:
    cred = iam.temporary(signed.secret_id)
    if cred is None:
        return iam.long_term(signed.secret_id)
    if signed.token is None or not hmac.compare_digest(signed.token.encode(), cred.token.encode()):
        raise CosError(403, "AccessDenied", "The x-cos-security-token is missing or does not match the SecretId.")
    if cred.expires_at <= now:
        raise CosError(403, "ExpiredToken", "The provided token has expired.")
    return Principal(signed.secret_id, cred.policy, temporary=True)


def resource(region: str, appid: str, bucket: str, key: str = "") -> str:
    """Bucket-level operations name the bucket itself (``key`` empty): ``.../<bucket>/``."""
    return f"qcs::cos:{region}:uid/{appid}:{bucket}/{key}"


def require(principal: Principal, action: str, resource_name: str, context: dict[str, str] | None = None) -> None:
    if not principal.may(f"name/cos:{action}", resource_name, context):
        raise CosError(403, "AccessDenied", f"Access Denied: the credential's policy does not allow cos:{action}.")
