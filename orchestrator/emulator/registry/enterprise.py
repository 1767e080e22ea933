"""Tencent Container Registry's enterprise edition: the account's instances, each a registry host of its own, and
the temporary logins CreateInstanceToken issues for them.

An instance's name "directly determines the access domain name", ``<name>.tencentcloudcr.com``; the instance is
regional (realcloud.md §5.2). CreateInstanceToken(RegistryId, TokenType) answers ``Username``, ``Token`` and
``ExpTime``; a ``temp`` token is valid for one hour (https://www.tencentcloud.com/document/product/1051/45154).
The admin API's ``POST registry/instances`` stands in for the console's purchase. A domain no instance has is not
a registry: the proxy answers it as an unknown host. An instance without a public IP reaches the registry only
from a VPC linked to it ("private network access", ManageInternalEndpoint, realcloud.md §5.2).
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
    links: dict[str, dict[str, str]] = field(default_factory=dict)  # registry id -> {linked VPC: its subnet}

    def instance(self, registry_id: str, region: str) -> Instance:
        """The instance ``registry_id`` as an API call of ``region`` sees it."""
        found = self.instances.get(registry_id)
        if found is None or found.region != region:
            raise ApiError("ResourceNotFound", f"The instance `{registry_id}` does not exist in {region}.")
        return found

    def link(self, registry_id: str, region: str, vpc_id: str, subnet_id: str, create: bool) -> None:
        """ManageInternalEndpoint: a VPC's private access to the instance, created or deleted."""
        linked = self.links.setdefault(self.instance(registry_id, region).registry_id, {})
        if create and vpc_id in linked:
            raise ApiError("FailedOperation.ErrorTcrResourceConflict", f"{vpc_id} is already linked to {registry_id}.")
        if not create and vpc_id not in linked:
            raise ApiError("ResourceNotFound", f"{vpc_id} is not linked to {registry_id}.")
        if create:
            linked[vpc_id] = subnet_id
        else:
            del linked[vpc_id]

    def reachable_from(self, host: str, vpc_id: str) -> bool:
        """Whether an instance in ``vpc_id`` without a public IP reaches the registry at ``host``."""
        instance = self.at(host)
        return instance is not None and vpc_id in self.links.get(instance.registry_id, {})

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
        self.instance(registry_id, region)
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
                "tokens": {t: asdict(g) for t, g in self.tokens.items()}, "links": self.links}

    def restore(self, state: dict[str, Any]) -> None:
        self.instances = {i["registry_id"]: Instance(**i) for i in state.get("instances", [])}
        self.tokens = {t: Token(**g) for t, g in state.get("tokens", {}).items()}
        self.links = {r: dict(v) for r, v in state.get("links", {}).items()}
