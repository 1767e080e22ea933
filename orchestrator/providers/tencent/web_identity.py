"""Keys that are not stored: an OIDC token (a web identity, such as GitHub Actions') traded with STS
AssumeRoleWithWebIdentity for a CAM role's temporary keys, and traded again before they expire.

Environment:
- ``TENCENTCLOUD_ROLE_ARN``: the role to assume, ``qcs::cam::uin/<uin>:roleName/<name>``; setting it turns this on.
- ``TENCENTCLOUD_OIDC_PROVIDER_ID``: the name of the CAM OIDC identity provider that vouches for the token (the
  call's ``ProviderId``).
- The token, from the first of:
  - ``TENCENTCLOUD_WEB_IDENTITY_TOKEN_FILE``: a file holding the JWT, read again at every exchange (whoever writes
    it may rotate it);
  - ``ACTIONS_ID_TOKEN_REQUEST_URL`` with ``ACTIONS_ID_TOKEN_REQUEST_TOKEN``: what GitHub Actions sets in a job with
    ``permissions: id-token: write``; a fresh token is asked for at every exchange, for the audience
    ``TENCENTCLOUD_OIDC_AUDIENCE`` (default ``sts.tencentcloudapi.com``; it must be a client id of the provider).
  The file comes first: it is set on purpose, while GitHub sets its variables in every job allowed OIDC.
- ``TENCENTCLOUD_ROLE_SESSION_NAME``: optional, default ``cvmjob`` (CloudAudit shows it).

Keys last ``DURATION_SECONDS``; they are traded again, when asked for, once less than five minutes or a fifth of
that is left. A configuration given by halves is an error that names the variable to set, never a fall-through
to another source of keys.
"""

from __future__ import annotations

import json
import re
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol
from urllib.parse import quote

from . import errors
from .errors import CredentialConfigError
from .keys import RefreshingCredential, StaticCredential
from .sts import web_identity_keys

ROLE_ARN = "TENCENTCLOUD_ROLE_ARN"
PROVIDER_ID = "TENCENTCLOUD_OIDC_PROVIDER_ID"
TOKEN_FILE = "TENCENTCLOUD_WEB_IDENTITY_TOKEN_FILE"
GITHUB_URL = "ACTIONS_ID_TOKEN_REQUEST_URL"
GITHUB_BEARER = "ACTIONS_ID_TOKEN_REQUEST_TOKEN"
AUDIENCE = "TENCENTCLOUD_OIDC_AUDIENCE"
SESSION_NAME = "TENCENTCLOUD_ROLE_SESSION_NAME"

DEFAULT_AUDIENCE = "sts.tencentcloudapi.com"
DEFAULT_SESSION_NAME = "cvmjob"
DURATION_SECONDS = 7200  # STS's default; a longer run is served by refreshes, each with a fresh token
REFRESH_MARGIN_SECONDS = 300
# STS answers for every region; the call's region only routes it.
STS_REGION = "ap-guangzhou"
# The exchange is sent unsigned (Authorization: SKIP): the SDK reads no keys for it.
_NO_KEYS = StaticCredential("", "")
_ROLE_ARN_RE = re.compile(r"^qcs::cam::uin/\d+:roleName/[\w+=,.@-]+$")
_SESSION_NAME_RE = re.compile(r"^[\w+=,.@-]{2,128}$")


class TokenSource(Protocol):
    @property
    def label(self) -> str: ...
    def read(self) -> str: ...


@dataclass(frozen=True)
class TokenFile:
    path: Path

    @property
    def label(self) -> str:
        return f"token file {self.path}"

    def read(self) -> str:
        try:
            token = self.path.read_text().strip()
        except OSError as exc:
            raise CredentialConfigError(f"{TOKEN_FILE}: cannot read {self.path}: {exc.strerror}") from exc
        if not token:
            raise CredentialConfigError(f"{TOKEN_FILE}: {self.path} is empty; it should hold the OIDC token (a JWT)")
        return token


@dataclass(frozen=True)
class GithubActionsToken:
    """GitHub's ID token request: GET the URL with ``audience`` added, ``Authorization: bearer <request token>``,
    answered ``{"value": "<jwt>"}`` (https://docs.github.com/en/actions/reference/security/oidc)."""

    url: str
    bearer: str
    audience: str

    @property
    def label(self) -> str:
        return "GitHub OIDC"

    def read(self) -> str:
        separator = "&" if "?" in self.url else "?"
        request = urllib.request.Request(
            f"{self.url}{separator}audience={quote(self.audience, safe='')}",
            headers={"Authorization": f"bearer {self.bearer}", "Accept": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=30) as resp:  # honours HTTPS_PROXY, as runners may need
                answer = json.loads(resp.read())
        except urllib.error.HTTPError as exc:
            exc.close()
            kind = errors.TransientError if exc.code >= 500 or exc.code == 429 else errors.AuthError
            raise kind("GitHubOidcRefused", f"GitHub answered HTTP {exc.code} to the OIDC token request") from exc
        except (OSError, ValueError) as exc:  # unreachable, timed out, or not JSON: worth asking again
            raise errors.TransientError("ClientNetworkError", f"no OIDC token from GitHub: {exc}") from exc
        token = answer.get("value") if isinstance(answer, dict) else None
        if not isinstance(token, str) or not token:
            raise errors.AuthError("GitHubOidcRefused", "GitHub's answer to the OIDC token request holds no token")
        return token


@dataclass(frozen=True)
class WebIdentityConfig:
    role_arn: str
    provider_id: str
    token: TokenSource
    session_name: str = DEFAULT_SESSION_NAME

    def describe(self) -> str:
        return f"web identity ({self.token.label}) as role {self.role_arn}"

    def credential(self, endpoint: str | None, now: Callable[[], float] = time.time) -> RefreshingCredential:
        """Keys of the role, traded for lazily and again near their expiry. ``endpoint``: the emulator's
        ``host:port``, or None for Tencent Cloud's STS; ``now``: the clock the keys' expiry is read on."""
        from ._sdk import TencentSdk  # only where keys are traded (the package's note)

        sdk = TencentSdk(_NO_KEYS, STS_REGION, endpoint)

        def exchange() -> tuple[StaticCredential, float]:
            keys = web_identity_keys(
                sdk, self.provider_id, self.token.read(), self.role_arn, self.session_name, DURATION_SECONDS
            )
            return StaticCredential(keys.secret_id, keys.secret_key, keys.token), float(keys.expires_at)

        margin = max(REFRESH_MARGIN_SECONDS, DURATION_SECONDS / 5)
        return RefreshingCredential(exchange, margin, now=now, lazy=True)


def from_environment(env: Mapping[str, str]) -> WebIdentityConfig | None:
    """The web identity the environment configures, None when it configures none."""
    role_arn = env.get(ROLE_ARN, "")
    if not role_arn:
        stray = [name for name in (PROVIDER_ID, TOKEN_FILE) if env.get(name)]
        if stray:
            raise CredentialConfigError(
                f"{stray[0]} is set but {ROLE_ARN} is not: set it to the CAM role to assume "
                "(qcs::cam::uin/<uin>:roleName/<name>)"
            )
        return None
    if not _ROLE_ARN_RE.match(role_arn):
        raise CredentialConfigError(f"{ROLE_ARN} {role_arn!r} is not a role: qcs::cam::uin/<uin>:roleName/<name>")
    provider_id = env.get(PROVIDER_ID, "")
    if not provider_id:
        raise CredentialConfigError(
            f"{ROLE_ARN} is set but {PROVIDER_ID} is not: set it to the name of the CAM OIDC identity provider "
            "that vouches for the token"
        )
    session_name = env.get(SESSION_NAME) or DEFAULT_SESSION_NAME
    if not _SESSION_NAME_RE.match(session_name):
        raise CredentialConfigError(
            f"{SESSION_NAME} {session_name!r} must be 2-128 characters of letters, digits and _+=,.@-"
        )
    return WebIdentityConfig(role_arn, provider_id, _token_source(env), session_name)


def _token_source(env: Mapping[str, str]) -> TokenSource:
    if env.get(TOKEN_FILE):
        path = Path(env[TOKEN_FILE])
        if not path.is_file():
            raise CredentialConfigError(f"{TOKEN_FILE} names {path}, which is not a file")
        return TokenFile(path)
    url, bearer = env.get(GITHUB_URL, ""), env.get(GITHUB_BEARER, "")
    if url and bearer:
        return GithubActionsToken(url, bearer, env.get(AUDIENCE) or DEFAULT_AUDIENCE)
    if url or bearer:
        given, missing = (GITHUB_URL, GITHUB_BEARER) if url else (GITHUB_BEARER, GITHUB_URL)
        raise CredentialConfigError(
            f"{given} is set but {missing} is not: GitHub sets both in a job with `permissions: id-token: write`"
        )
    raise CredentialConfigError(
        f"{ROLE_ARN} is set but there is no OIDC token: set {TOKEN_FILE}, or in GitHub Actions give the job "
        f"`permissions: id-token: write` (it sets {GITHUB_URL} and {GITHUB_BEARER})"
    )
