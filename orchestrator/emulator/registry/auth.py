"""Who may pull and push: the registry's logins and the bearer tokens of its token service.

Tencent Container Registry's personal edition, ``ccr.ccs.tencentyun.com``, logs in with the account's UIN and a
password set in the console (``docker login ccr.ccs.tencentyun.com --username=<account id>``, realcloud.md §5.2);
the admin API's ``PUT registry/password`` stands in for the console. An enterprise instance's domain also takes the
temporary tokens of CreateInstanceToken (enterprise.py). Every repository of Tencent's registries is private: no
anonymous pull. Docker Hub (its API's host, ``registry-1.docker.io``) is the internet's: a user pushes there with a
password, anyone pulls; an instance without a public IP reaches it only through Tencent's mirror,
``mirror.ccs.tencentyun.com``, which serves Docker Hub's repositories to anyone and takes no push.
A client logs in the Docker way: ``GET /v2/`` answers 401 with a ``Bearer`` challenge naming the token service,
which takes the login (HTTP Basic) and answers a token for the scopes asked (``repository:<name>:pull,push``).
"""

from __future__ import annotations

import base64
import binascii
import hmac
import secrets
from dataclasses import dataclass, field

from .enterprise import Enterprise
from .store import RegistryError

PERSONAL = "ccr.ccs.tencentyun.com"
DOCKER_HUB = "registry-1.docker.io"
DOCKER_HUB_MIRROR = "mirror.ccs.tencentyun.com"
_PUBLIC = (DOCKER_HUB, DOCKER_HUB_MIRROR)  # registries whose every repository anyone may pull
ANONYMOUS = "anonymous"
TOKEN_PATH = "/service/token"
TOKEN_SECONDS = 300


@dataclass(frozen=True)
class Grant:
    registry: str
    user: str
    scopes: frozenset[tuple[str, str]]  # (repository, action)
    expires: float


@dataclass
class Logins:
    uin: str
    passwords: dict[str, str] = field(default_factory=dict)  # registry host -> the account's password there
    tokens: dict[str, Grant] = field(default_factory=dict)
    enterprise: Enterprise = field(init=False)

    def __post_init__(self) -> None:
        self.enterprise = Enterprise(self.uin)

    def set_password(self, registry: str, password: str) -> None:
        self.passwords[registry] = password

    def login(self, registry: str, authorization: str, now: float) -> str:
        """The user an HTTP Basic ``authorization`` logs in as (the account's password there, or a token of the
        enterprise instance there, or no login at all for a pull of Docker Hub); RegistryError when it does not."""
        if not authorization and registry in _PUBLIC:
            return ANONYMOUS
        scheme, _, value = authorization.partition(" ")
        if scheme.lower() != "basic":
            raise RegistryError("UNAUTHORIZED", 401, "the token service takes a login (HTTP Basic): docker login")
        try:
            user, _, password = base64.b64decode(value, validate=True).decode().partition(":")
        except (binascii.Error, UnicodeDecodeError):
            raise RegistryError("UNAUTHORIZED", 401, "the login is not HTTP Basic") from None
        if self.enterprise.accepts(registry, user, password, now):
            return user
        expected = self.passwords.get(registry)
        if user != self.uin or expected is None or not hmac.compare_digest(password, expected):
            raise RegistryError("UNAUTHORIZED", 401, f"{registry}: wrong username or password (or an expired token)")
        return user

    def issue(self, registry: str, user: str, scope: list[str], now: float) -> str:
        """A token for ``scope`` (``repository:<name>:<actions>`` entries); the account may pull and push its own,
        anyone may pull Docker Hub's, and no one pushes through its mirror."""
        may = ("pull",) if user == ANONYMOUS or registry == DOCKER_HUB_MIRROR else ("pull", "push")
        granted = set()
        for entry in scope:
            kind, _, rest = entry.partition(":")
            name, _, actions = rest.rpartition(":")
            if kind == "repository" and name:
                granted |= {(name, action) for action in actions.split(",") if action in may}
        token = secrets.token_urlsafe(32)
        self.tokens = {t: g for t, g in self.tokens.items() if g.expires > now}
        self.tokens[token] = Grant(registry, user, frozenset(granted), now + TOKEN_SECONDS)
        return token

    def allowed(self, registry: str, authorization: str, repository: str | None, action: str, now: float) -> None:
        """RegistryError (401, with the challenge to send) unless ``authorization`` carries a live token of this
        registry for ``action`` on ``repository`` (None: the API's base, any token)."""
        scheme, _, token = authorization.partition(" ")
        grant = self.tokens.get(token) if scheme.lower() == "bearer" else None
        if grant is None or grant.expires <= now or grant.registry != registry:
            raise RegistryError("UNAUTHORIZED", 401, "authentication required")
        if repository is not None and (repository, action) not in grant.scopes:
            raise RegistryError("DENIED", 401, f"the token does not allow {action} of {repository}")


def challenge(registry: str, repository: str | None, action: str) -> str:
    scope = "" if repository is None else f',scope="repository:{repository}:{action}"'
    return f'Bearer realm="http://{registry}{TOKEN_PATH}",service="{registry}"{scope}'
