"""Emulated time: the wall clock plus an offset that the admin API can advance.

Signatures are checked against the real wall clock (the clients sign with it); everything the cloud schedules
(boot, notices, ActionTimer, billing, image creation) runs on this clock, so tests can jump over minutes.
"""

from __future__ import annotations

import threading
import time


class Clock:
    def __init__(self, mode: str = "real", start: float | None = None) -> None:
        if mode not in ("real", "manual"):
            raise ValueError(f"clock mode must be 'real' or 'manual', not {mode!r}")
        self._mode = mode
        self._lock = threading.Lock()
        self._offset = 0.0
        self._manual_now = time.time() if start is None else start

    @property
    def mode(self) -> str:
        return self._mode

    def now(self) -> float:
        with self._lock:
            if self._mode == "manual":
                return self._manual_now
            return time.time() + self._offset

    def advance(self, seconds: float) -> float:
        if seconds < 0:
            raise ValueError("time only moves forward")
        with self._lock:
            if self._mode == "manual":
                self._manual_now += seconds
            else:
                self._offset += seconds
        return self.now()

    def rejoin_wall_clock(self) -> None:
        """A real clock drops the offset that advance() built up (a new account starts at the wall clock, or a
        client that signs and sets ActionTime with its own clock would be minutes behind the cloud); a manual clock
        keeps its time, which only advance() moves."""
        with self._lock:
            self._offset = 0.0

    def state(self) -> dict[str, float]:
        with self._lock:
            return {"offset": self._offset, "manual_now": self._manual_now}

    def restore(self, state: dict[str, float]) -> None:
        with self._lock:
            self._offset = float(state.get("offset", 0.0))
            self._manual_now = max(self._manual_now, float(state.get("manual_now", 0.0)))
