"""Who is calling: the account's long-term key, and the temporary credentials STS and the metadata service
issue, each optionally narrowed by a CAM policy that the emulator enforces (API 3.0 and COS alike).

CAM policy evaluation follows the documented model: an explicit deny wins, otherwise some statement must allow
the action on the resource (https://cloud.tencent.com/document/product/598/10603). Temporary credentials get
the intersection of their issuer's rights and the session policy, fixed when they are issued.

The long-term key has the account's full rights until the admin API gives it a policy (``PUT /_emulator/cam/policy``):
then it is what a sub-account's key is on Tencent Cloud, allowed only what its user's policies allow, and so is
every credential it issues (GetFederationToken, AssumeRole).
"""

from __future__ import annotations

import fnmatch
import secrets
import string
import threading
from dataclasses import dataclass, field
from typing import Any

_ALNUM = string.ascii_letters + string.digits


def random_token(length: int) -> str:
    return "".join(secrets.choice(_ALNUM) for _ in range(length))


@dataclass(frozen=True)
class Policy:
    statements: tuple[dict[str, Any], ...]
    # A credential issued by a narrowed credential is bound by both policies.
    parent: Policy | None = None

    @staticmethod
    def intersect(first: Policy | None, second: Policy | None) -> Policy | None:
        if first is None or second is None:
            return first or second
        return Policy(first.statements, Policy.intersect(first.parent, second))

    @classmethod
    def parse(cls, document: dict[str, Any]) -> Policy:
        raw = document.get("statement")
        if not isinstance(raw, list) or not raw:
            raise ValueError("policy needs a non-empty 'statement' list")
        statements = []
        for st in raw:
            if not isinstance(st, dict) or st.get("effect") not in ("allow", "deny"):
                raise ValueError("each statement needs effect 'allow' or 'deny'")
            statements.append(
                {
                    "effect": st["effect"],
                    "action": _as_list(st.get("action", [])),
                    "resource": _as_list(st.get("resource", ["*"])),
                    "condition": st.get("condition") or {},
                }
            )
        return cls(tuple(statements))

    def allows(self, action: str, resource: str, context: dict[str, str] | None = None) -> bool:
        context = context or {}
        if self.parent is not None and not self.parent.allows(action, resource, context):
            return False
        allowed = False
        for st in self.statements:
            if not _matches_any(action, st["action"]) or not _matches_any(resource, st["resource"]):
                continue
            if not _conditions_hold(st["condition"], context):
                continue
            if st["effect"] == "deny":
                return False
            allowed = True
        return allowed


def _as_list(value: Any) -> list[str]:
    return [value] if isinstance(value, str) else [str(v) for v in value]


def _matches_any(value: str, patterns: list[str]) -> bool:
    # CAM action names are case-sensitive; fnmatchcase keeps them so.
    return any(fnmatch.fnmatchcase(value, p) for p in patterns)


def _conditions_hold(condition: dict[str, Any], context: dict[str, str]) -> bool:
    for operator, checks in condition.items():
        for key, expected in checks.items():
            actual = context.get(key)
            wanted = _as_list(expected)
            if operator == "string_like":
                if actual is None or not _matches_any(actual, wanted):
                    return False
            elif operator == "string_equal":
                if actual is None or actual not in wanted:
                    return False
            else:  # an operator we do not model: fail closed, like an unknown condition would
                return False
    return True


@dataclass
class TemporaryCredential:
    secret_id: str
    secret_key: str
    token: str
    expires_at: float
    policy: Policy | None
    source: str  # "GetFederationToken:<name>", "AssumeRole:<arn>", "role:<instance>"

    def to_state(self) -> dict[str, Any]:
        return {
            "secret_id": self.secret_id,
            "secret_key": self.secret_key,
            "token": self.token,
            "expires_at": self.expires_at,
            "policy": _policy_state(self.policy),
            "source": self.source,
        }

    @classmethod
    def from_state(cls, data: dict[str, Any]) -> TemporaryCredential:
        policy = _policy_from_state(data.get("policy"))
        return cls(data["secret_id"], data["secret_key"], data["token"], data["expires_at"], policy, data["source"])


def _policy_state(policy: Policy | None) -> list[list[dict[str, Any]]] | None:
    chain = []
    while policy is not None:
        chain.append(list(policy.statements))
        policy = policy.parent
    return chain or None


def _policy_from_state(chain: list[list[dict[str, Any]]] | None) -> Policy | None:
    policy: Policy | None = None
    for statements in reversed(chain or []):
        policy = Policy(tuple(statements), policy)
    return policy


@dataclass(frozen=True)
class Principal:
    """The authenticated caller of one request."""

    secret_id: str
    policy: Policy | None = None  # None: the account's full rights
    temporary: bool = False

    def may(self, action: str, resource: str = "*", context: dict[str, str] | None = None) -> bool:
        return self.policy is None or self.policy.allows(action, resource, context)


@dataclass
class Iam:
    secret_id: str
    secret_key: str
    uin: str
    appid: str
    _temporary: dict[str, TemporaryCredential] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    # The long-term key's policy; None: the root account's full rights.
    account_policy: Policy | None = None

    def long_term(self, secret_id: str) -> Principal:
        """The caller whose signature the long-term key verified."""
        return Principal(secret_id, self.account_policy)

    def narrow(self, document: dict[str, Any] | None) -> Policy | None:
        """The long-term key from now on: allowed what ``document`` (a CAM policy) allows; None: everything."""
        self.account_policy = None if document is None else Policy.parse(document)
        return self.account_policy

    def account_state(self) -> list[list[dict[str, Any]]] | None:
        return _policy_state(self.account_policy)

    def restore_account(self, state: list[list[dict[str, Any]]] | None) -> None:
        self.account_policy = _policy_from_state(state)

    def issue(self, duration: float, now: float, policy: Policy | None, source: str) -> TemporaryCredential:
        cred = TemporaryCredential(
            secret_id="AKID" + random_token(32),
            secret_key=random_token(32),
            token=random_token(96),
            expires_at=now + duration,
            policy=policy,
            source=source,
        )
        with self._lock:
            self._temporary[cred.secret_id] = cred
        return cred

    def secret_for(self, secret_id: str) -> str | None:
        if secret_id == self.secret_id:
            return self.secret_key
        with self._lock:
            cred = self._temporary.get(secret_id)
        return cred.secret_key if cred else None

    def temporary(self, secret_id: str) -> TemporaryCredential | None:
        with self._lock:
            return self._temporary.get(secret_id)

    def expire_all(self, now: float) -> int:
        """Fault injection: every temporary credential expires now."""
        with self._lock:
            for cred in self._temporary.values():
                cred.expires_at = min(cred.expires_at, now)
            return len(self._temporary)

    def forget_expired(self, now: float, grace: float = 3600.0) -> None:
        with self._lock:
            for sid in [s for s, c in self._temporary.items() if c.expires_at + grace < now]:
                del self._temporary[sid]

    def to_state(self) -> list[dict[str, Any]]:
        with self._lock:
            return [c.to_state() for c in self._temporary.values()]

    def restore(self, items: list[dict[str, Any]]) -> None:
        with self._lock:
            for item in items:
                cred = TemporaryCredential.from_state(item)
                self._temporary[cred.secret_id] = cred
