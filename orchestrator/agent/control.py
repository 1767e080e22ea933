"""control.json: the controller's requests to this attempt's agents (today: cancel)."""

from __future__ import annotations

import time

from orchestrator.contract import Control
from orchestrator.providers.tencent.storage import ObjectStore

from .stop import CANCEL_GRACE_SECONDS, STOP_NOW_SECONDS, StopRequest, StopSignal


class ControlWatcher:
    def __init__(self, store: ObjectStore, key: str, stop: StopSignal) -> None:
        self.store = store
        self.key = key
        self.stop = stop

    def tick(self) -> None:
        doc = self.store.get_json(self.key)
        if doc is None or self.stop.current is not None:
            return
        control = Control.model_validate(doc)
        if control.action == "cancel":
            grace = CANCEL_GRACE_SECONDS if control.checkpoint else STOP_NOW_SECONDS
            self.stop.request(StopRequest("cancel", f"cancelled: {control.reason}", time.monotonic() + grace,
                                          checkpoint=control.checkpoint))
