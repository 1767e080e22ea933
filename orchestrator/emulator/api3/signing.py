"""TC3-HMAC-SHA256 verification, recomputed from the request exactly as received.

Algorithm: https://cloud.tencent.com/document/api/213/30654. Facts the clients force (shared/reference/
client-recipes.md §2.8-2.9): SignedHeaders is always content-type;host, the Host is signed as sent (tccli and
STSAssumeRoleCredential send the literal "http://127.0.0.1:PORT"), the body is signed as raw bytes, GET signs the
raw query string, and X-TC-Token is not covered by the signature (it is checked against the issued credential).
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from urllib.parse import urlsplit

from ..errors import ApiError

_AUTH_RE = re.compile(
    r"^TC3-HMAC-SHA256 Credential=(?P<sid>[^/]+)/(?P<date>\d{4}-\d{2}-\d{2})/(?P<service>[^/]+)/tc3_request,"
    r"\s*SignedHeaders=(?P<sh>[^,]+),\s*Signature=(?P<sig>[0-9a-f]{64})$"
)
MAX_SKEW_SECONDS = 300


@dataclass(frozen=True)
class SignedRequest:
    secret_id: str
    service: str
    timestamp: int


def _hmac(key: bytes, msg: str) -> hmac.HMAC:
    return hmac.new(key, msg.encode("utf-8"), hashlib.sha256)


def tc3_signature(secret_key: str, date: str, service: str, string_to_sign: str) -> str:
    k_date = _hmac(("TC3" + secret_key).encode("utf-8"), date).digest()
    k_service = _hmac(k_date, service).digest()
    k_signing = _hmac(k_service, "tc3_request").digest()
    return _hmac(k_signing, string_to_sign).hexdigest()


def verify_tc3(
    method: str,
    target: str,
    headers: Mapping[str, str],
    body: bytes,
    lookup_secret: Callable[[str], str | None],
    now: float,
) -> SignedRequest:
    """Return who signed the request, or raise ApiError with the code the real API answers.

    ``headers`` must be case-insensitive (aiohttp's CIMultiDictProxy is); ``now`` is the wall clock."""
    auth = headers.get("Authorization")
    if not auth:
        raise ApiError("AuthFailure.SignatureFailure", "The request has no Authorization header.")
    m = _AUTH_RE.match(auth.strip())
    if not m:
        raise ApiError("AuthFailure.InvalidAuthorization", "The Authorization header is malformed.")
    ts = headers.get("X-TC-Timestamp", "")
    if not ts.isdigit():
        raise ApiError("AuthFailure.SignatureFailure", "X-TC-Timestamp is missing or not an integer.")
    if abs(now - int(ts)) > MAX_SKEW_SECONDS:
        raise ApiError(
            "AuthFailure.SignatureExpire",
            "Timestamp and server time cannot differ by more than five minutes; "
            f"the request was signed {int(now) - int(ts)} s away from server time.",
        )
    if m["date"] != datetime.fromtimestamp(int(ts), timezone.utc).strftime("%Y-%m-%d"):
        raise ApiError("AuthFailure.SignatureFailure", "The credential date does not match X-TC-Timestamp.")
    secret = lookup_secret(m["sid"])
    if secret is None:
        raise ApiError("AuthFailure.SecretIdNotFound", "The SecretId is not found, deleted or disabled.")

    parts = urlsplit(target)
    canonical_uri = parts.path or "/"
    canonical_query = parts.query if method.upper() == "GET" else ""
    if headers.get("X-TC-Content-SHA256") == "UNSIGNED-PAYLOAD":
        payload_hash = hashlib.sha256(b"UNSIGNED-PAYLOAD").hexdigest()
    elif method.upper() == "GET":
        payload_hash = hashlib.sha256(b"").hexdigest()
    else:
        payload_hash = hashlib.sha256(body).hexdigest()
    scope = f"{m['date']}/{m['service']}/tc3_request"
    signed_headers = m["sh"].split(";")
    # The published algorithm lower-cases header values; the Python SDK signs them as sent. Accept both.
    for lower_values in (False, True):
        canonical_headers = "".join(f"{name}:{_header_value(headers, name, lower_values)}\n" for name in signed_headers)
        canonical_request = "\n".join(
            [method.upper(), canonical_uri, canonical_query, canonical_headers, m["sh"], payload_hash]
        )
        digest = hashlib.sha256(canonical_request.encode("utf-8")).hexdigest()
        string_to_sign = f"TC3-HMAC-SHA256\n{ts}\n{scope}\n{digest}"
        if hmac.compare_digest(tc3_signature(secret, m["date"], m["service"], string_to_sign), m["sig"]):
            return SignedRequest(m["sid"], m["service"], int(ts))
    raise ApiError(
        "AuthFailure.SignatureFailure",
        "The provided credentials could not be validated. Please check your signature is correct.",
    )


def _header_value(headers: Mapping[str, str], name: str, lower: bool) -> str:
    value = headers.get(name, "").strip()
    return value.lower() if lower else value
