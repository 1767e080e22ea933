"""A background thread that calls one function every few seconds until stopped.

A failing call is logged and the next one happens on schedule: a COS hiccup must never kill a heartbeat, the
log shipper or a watcher. The same failure is logged once a minute, not at every tick.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from orchestrator.providers.tencent.errors import CloudError

from .metadata import MetadataError

log = logging.getLogger(__name__)
_REPEAT_LOG_SECONDS = 60.0


class Periodic:
    def __init__(self, name: str, interval: float, tick: Callable[[], None],
                 wake: threading.Event | None = None) -> None:
        self.name = name
        self.interval = interval
        self._tick = tick
        self._wake = wake or threading.Event()
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._last_error = ("", 0.0)

    def start(self) -> Periodic:
        self._thread.start()
        return self

    def stop(self, timeout: float = 30.0) -> None:
        """Stop after the tick in progress (if any) finishes."""
        self._stopping.set()
        self._wake.set()
        self._thread.join(timeout)

    def _run(self) -> None:
        while not self._stopping.is_set():
            self._wake.clear()
            self.run_once()
            self._wake.wait(self.interval)

    def run_once(self) -> bool:
        """One tick with the error policy above; True when it succeeded."""
        try:
            self._tick()
        except (CloudError, MetadataError, OSError) as exc:
            self._log_failure(str(exc), exc_info=False)
            return False
        except Exception as exc:
            self._log_failure(repr(exc), exc_info=True)
            return False
        return True

    def _log_failure(self, message: str, exc_info: bool) -> None:
        last_message, last_time = self._last_error
        now = time.monotonic()
        if message != last_message or now - last_time > _REPEAT_LOG_SECONDS:
            log.warning("%s: %s", self.name, message, exc_info=exc_info)
            self._last_error = (message, now)
