"""Tencent Container Registry's enterprise edition: the account's instances, each a registry host of its own, and
the temporary logins CreateInstanceToken issues for them.

An instance's name "directly determines the access domain name", ``<name>.tencentcloudcr.com``; the instance is
regional (realcloud.md §5.2). CreateInstanceToken(RegistryId, TokenType) answers ``Username``, ``Token`` and
``ExpTime``; a ``temp`` token is valid for one hour (https://www.tencentcloud.com/document/product/1051/45154).
The admin API's ``POST registry/instances`` stands in for the console's purchase. A domain no instance has is not
a registry: the proxy answers it as an unknown host.
"""

from __future__ import annotations

import hmac
import re
import secrets
from dataclasses import asdict, dataclass, field
from typing import Any

from ..errors import ApiError
from ..ids import new_id

SUFFIX = ".tencentcloudcr.com"
TEMP_SECONDS = 3600
LONG_TERM_SECONDS = 365 * 86400
_NAME = re.compile(r"^[a-z0-9](?:[a-z0-9-]{3,48})[a-z0-9]$")  # 5 to 50: lower-case letters, digits, inner '-'


@dataclass(frozen=True)
class Instance:
    registry_id: str
    name: str
    region: str

    @property
    def domain(self) -> str:
        return self.name + SUFFIX


@dataclass(frozen=True)
class Token:
    registry_id: str
    username: str
    expires: float


@dataclass
class Enterprise:
    uin: str
    instances: dict[str, Instance] = field(default_factory=dict)  # registry id -> instance
    tokens: dict[str, Token] = field(default_factory=dict)  # token -> what it logs in to, until when

    def create(self, name: str, region: str) -> Instance:
        if not _NAME.match(name):
            raise ValueError(f"{name!r} is not an instance name: 5 to 50 lower-case letters, digits and inner '-'")
        if any(i.name == name for i in self.instances.values()):
            raise ValueError(f"an instance is already named {name!r} (its domain is {name}{SUFFIX})")
        instance = Instance(new_id("tcr"), name, region)
        self.instances[instance.registry_id] = instance
        return instance

    def at(self, host: str) -> Instance | None:
        """The instance whose domain ``host`` is."""
        return next((i for i in self.instances.values() if i.domain == host), None)

    def issue(self, registry_id: str, region: str, token_type: str, now: float) -> tuple[Token, str]:
        """CreateInstanceToken in ``region``: the token and its value."""
        if token_type not in ("temp", "longterm"):
            raise ApiError("InvalidParameterValue", f"TokenType must be temp or longterm, not {token_type!r}.")
        instance = self.instances.get(registry_id)
        if instance is None or instance.region != region:
            raise ApiError("ResourceNotFound", f"The instance `{registry_id}` does not exist in {region}.")
        self.tokens = {t: g for t, g in self.tokens.items() if g.expires > now}
        value = secrets.token_urlsafe(48)
        token = Token(registry_id, self.uin, now + (TEMP_SECONDS if token_type == "temp" else LONG_TERM_SECONDS))
        self.tokens[value] = token
        return token, value

    def accepts(self, host: str, user: str, password: str, now: float) -> bool:
        """Whether ``user``/``password`` is a live token of the instance at ``host``."""
        instance = self.at(host)
        found = next((g for t, g in self.tokens.items() if hmac.compare_digest(t, password)), None)
        return (instance is not None and found is not None and found.registry_id == instance.registry_id
                and found.username == user and found.expires > now)

    def to_state(self) -> dict[str, Any]:
        return {"instances": [asdict(i) for i in self.instances.values()],
                "tokens": {t: asdict(g) for t, g in self.tokens.items()}}

    def restore(self, state: dict[str, Any]) -> None:
        self.instances = {i["registry_id"]: Instance(**i) for i in state.get("instances", [])}
        self.tokens = {t: Token(**g) for t, g in state.get("tokens", {}).items()}
