"""Keys as both SDKs take them: fixed ones, and temporary ones that fetch their successor before they expire.
No SDK is imported here: the agent's and the controller's code builds these and hands them to a connection."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol


class CredentialSource(Protocol):
    """What both SDKs accept: the API 3.0 SDK calls get_credential_info(); the COS SDK reads the properties."""

    @property
    def secret_id(self) -> str: ...
    @property
    def secret_key(self) -> str: ...
    @property
    def token(self) -> str | None: ...
    def get_credential_info(self) -> tuple[str, str, str | None]: ...


@dataclass(frozen=True)
class StaticCredential:
    secret_id: str
    secret_key: str
    token: str | None = None

    def get_credential_info(self) -> tuple[str, str, str | None]:
        return self.secret_id, self.secret_key, self.token


class RefreshingCredential:
    """Temporary credentials that fetch a successor shortly before they expire (STS tokens on an instance, a web
    identity's role keys). ``fetch`` answers keys and their expiry on the ``now`` clock. ``lazy``: the first keys
    are fetched when first asked for, not here (a source that is found but never used costs no call)."""

    def __init__(
        self,
        fetch: Callable[[], tuple[StaticCredential, float]],
        margin_seconds: float = 300,
        *,
        now: Callable[[], float] = time.time,
        lazy: bool = False,
    ) -> None:
        self._fetch = fetch
        self._margin = margin_seconds
        self._now = now
        self._current: StaticCredential | None = None
        self._expires_at = 0.0
        # The SDKs' threads may all find the keys stale at once: one fetch serves them.
        self._lock = threading.Lock()
        if not lazy:
            self._fresh()

    def _fresh(self) -> StaticCredential:
        with self._lock:
            if self._current is None or self._now() > self._expires_at - self._margin:
                self._current, self._expires_at = self._fetch()
            return self._current

    @property
    def secret_id(self) -> str:
        return self._fresh().secret_id

    @property
    def secret_key(self) -> str:
        return self._fresh().secret_key

    @property
    def token(self) -> str | None:
        return self._fresh().token

    def get_credential_info(self) -> tuple[str, str, str | None]:
        return self._fresh().get_credential_info()

    def rejected(self) -> None:
        """The cloud no longer takes the current keys (expired early, revoked): fetch a successor before the
        next call instead of waiting for their stated expiry."""
        self._expires_at = 0.0
