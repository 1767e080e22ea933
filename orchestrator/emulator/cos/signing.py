"""q-sign-algorithm=sha1 verification, recomputed from the request exactly as received.

Algorithm: https://cloud.tencent.com/document/product/436/7778 (shared/reference/tencent-cloud-api.md §6.2). What
the clients force (shared/reference/client-recipes.md §3.3, §3.6): the signature travels in ``Authorization`` or,
for presigned URLs, in the query string; the path is signed decoded; the host is signed as sent in ``Host`` (IP
mode, proxies) or without its port (the SDK takes ``urlparse(url).hostname`` when it set no Host header itself);
header and parameter names are signed url-quoted and lower-cased, values url-quoted.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from urllib.parse import parse_qsl, quote, unquote, urlsplit

from ..errors import CosError

TOKEN = "x-cos-security-token"
_REQUIRED = (
    "q-sign-algorithm",
    "q-ak",
    "q-sign-time",
    "q-key-time",
    "q-header-list",
    "q-url-param-list",
    "q-signature",
)


@dataclass(frozen=True)
class SignedRequest:
    secret_id: str
    token: str | None  # x-cos-security-token, from the header or (presigned URLs) the query


def _quote(value: str) -> str:
    return quote(value, safe="-_.~")


def _fields(target: str, headers: Mapping[str, str]) -> tuple[dict[str, str], list[tuple[str, str]]]:
    """The q-* signature fields and the query parameters that are not part of the signature."""
    query = parse_qsl(urlsplit(target).query, keep_blank_values=True)
    auth = headers.get("Authorization", "")
    if auth:
        fields = dict(item.partition("=")[::2] for item in auth.split("&"))
        return fields, query
    fields = {k: v for k, v in query if k.startswith("q-")}
    return fields, [(k, v) for k, v in query if not k.startswith("q-")]


def verify(
    method: str,
    target: str,
    headers: Mapping[str, str],
    lookup_secret: Callable[[str], str | None],
    now: float,
) -> SignedRequest:
    """Return who signed the request, or raise the CosError COS answers.

    ``target`` is the request target as received (origin- or absolute-form), ``headers`` case-insensitive
    (aiohttp's are), ``now`` the wall clock: clients sign with it."""
    fields, query = _fields(target, headers)
    if not fields:
        raise CosError(403, "AccessDenied", "Access Denied. The request carries no signature.")
    missing = [name for name in _REQUIRED if name not in fields]
    if missing:
        raise CosError(403, "AccessDenied", f"The signature lacks {', '.join(missing)}.")
    if fields["q-sign-algorithm"] != "sha1":
        raise CosError(403, "AccessDenied", "q-sign-algorithm must be sha1.")
    try:
        start, end = (int(t) for t in fields["q-sign-time"].split(";"))
    except ValueError:
        raise CosError(403, "AccessDenied", "q-sign-time is not <start>;<end>.") from None
    if not start <= now <= end:
        raise CosError(403, "AccessDenied", f"Request has expired: q-sign-time {start};{end}, server time {int(now)}.")
    secret = lookup_secret(fields["q-ak"])
    if secret is None:
        raise CosError(403, "InvalidAccessKeyId", "The access key Id format you provided is invalid or not exist.")

    path = unquote(urlsplit(target).path) or "/"
    params = {_quote(k).lower(): _quote(v) for k, v in query}
    param_names = sorted(p for p in fields["q-url-param-list"].split(";") if p)
    params_str = "&".join(f"{n}={params.get(n, '')}" for n in param_names)
    header_names = sorted(h for h in fields["q-header-list"].split(";") if h)
    sign_key = hmac.new(secret.encode(), fields["q-key-time"].encode(), hashlib.sha1).hexdigest()
    host = headers.get("Host", "")
    hosts = [host, host.rsplit(":", 1)[0]] if ":" in host else [host]
    for signed_host in hosts:
        headers_str = "&".join(
            f"{n}={_quote(signed_host if n == 'host' else headers.get(n, ''))}" for n in header_names
        )
        http_string = f"{method.lower()}\n{path}\n{params_str}\n{headers_str}\n"
        string_to_sign = f"sha1\n{fields['q-sign-time']}\n{hashlib.sha1(http_string.encode()).hexdigest()}\n"
        signature = hmac.new(sign_key.encode(), string_to_sign.encode(), hashlib.sha1).hexdigest()
        if hmac.compare_digest(signature, fields["q-signature"]):
            token = headers.get(TOKEN) or dict(query).get(TOKEN)
            return SignedRequest(fields["q-ak"], token)
    raise CosError(
        403,
        "SignatureDoesNotMatch",
        "The request signature we calculated does not match the signature you provided. "
        "Check your key and signing method.",
    )
