"""The sender: posts the store's due notifications on a thread of its own, so that a receiver that fails, or never
answers, delays no job. Every controller of a store runs one (``cvmjob run``, ``resume``, ``controller``): what a
killed one left pending is sent by the next, once its claim runs out (state/outbox.py)."""

from __future__ import annotations

import json
import logging
import os
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Collection, Mapping

from pydantic import ValidationError

from ..errors import CvmjobError
from ..spec.notify import NotifyTarget
from ..state.outbox import Notification, Outbox
from . import formats

log = logging.getLogger(__name__)

TIMEOUT_SECONDS = 5.0  # one POST: a receiver that never answers costs the sender this, and no job anything
POLL_SECONDS = 1.0
MAX_TRIES = 10
FIRST_RETRY_SECONDS = 10.0
LONGEST_RETRY_SECONDS = 900.0  # ten tries span about an hour and a half
# At a process's end, how long the notifications still due (a job's last) may hold it up: a receiver that never
# answers costs this, and its notification waits for the next controller of the store.
FLUSH_SECONDS = 3.0


def retry_at(tries: int, now: float) -> float | None:
    """When a notification that failed its ``tries``-th try is tried again; None: given up."""
    if tries >= MAX_TRIES:
        return None
    return now + min(FIRST_RETRY_SECONDS * 2.0 ** (tries - 1), LONGEST_RETRY_SECONDS)


class Deliverer:
    def __init__(self, outbox: Outbox, owner: str, *, now: Callable[[], float] = time.time,
                 environ: Mapping[str, str] = os.environ, timeout: float = TIMEOUT_SECONDS,
                 subjects: Collection[str] | None = None) -> None:
        """``subjects``: only those jobs' (or sweeps') notifications; None: any in the store (a controller's)."""
        self.outbox = outbox
        self.subjects = subjects
        self.owner = owner
        self.now = now
        self.environ = environ
        self.timeout = timeout
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="cvmjob-notify", daemon=True)
            self._thread.start()

    def stop(self, within: float) -> None:
        """Send what is due for at most ``within`` seconds more, then stop: what is left waits for the next
        controller of this store."""
        if self._thread is None:
            return
        self._stop.set()
        self._wake.set()
        self._thread.join(timeout=within)

    def flush(self, within: float = FLUSH_SECONDS) -> None:
        """At a process's end: what is due sent for at most ``within`` seconds (started here if it was not)."""
        self.start()
        self.stop(within)

    def _run(self) -> None:
        while True:
            try:
                sent_some = self.send_due()
            except CvmjobError as exc:  # the store busy or gone: the engine says so once; the next pass tries again
                log.debug("notifications: the store: %s", exc)
                sent_some = False
            except Exception as exc:  # never the job's failure, nor a traceback in its output
                log.warning("notifications: a pass failed: %s", exc)
                sent_some = False
            if self._stop.is_set() and not sent_some:
                return
            if not sent_some:
                self._wake.wait(POLL_SECONDS)
                self._wake.clear()

    def send_due(self) -> bool:
        """One pass: each due notification claimed and sent once; whether there were any."""
        claimed = self.outbox.claim(self.owner, self.now(), subjects=self.subjects)
        for notification in claimed:
            error = self._send(notification)
            if error is None:
                self.outbox.sent(notification.id, self.owner, self.now())
            else:
                again = retry_at(notification.tries + 1, self.now())
                log.warning("notification %s not sent: %s; %s", notification.key, error,
                            "given up" if again is None else f"tried again in {again - self.now():.0f} s")
                self.outbox.failed(notification.id, self.owner, error, again)
        return bool(claimed)

    def _send(self, notification: Notification) -> str | None:
        try:
            target = NotifyTarget.model_validate(notification.target)
        except ValidationError:
            return "its target in the store is not one this cvmjob can read"
        url = target.url or self.environ.get(target.url_env or "")
        if not url:
            return f"${target.url_env} is not set in this controller's environment"
        data = json.dumps(formats.payload(target.format, notification.body)).encode()
        request = urllib.request.Request(url, data=data, method="POST",
                                         headers={"Content-Type": "application/json", "User-Agent": "cvmjob"})
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as answer:
                return formats.problem(target.format, answer.status, answer.read(64 * 1024))
        except urllib.error.HTTPError as exc:
            with exc:
                return formats.problem(target.format, exc.code, exc.read(64 * 1024)) or f"HTTP {exc.code}"
        except (OSError, ValueError) as exc:  # refused, reset, timed out; never the URL (it may hold a token)
            return str(getattr(exc, "reason", exc)).replace(url, "<url>") or "no answer"
