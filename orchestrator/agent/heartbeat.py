"""status.json: the agent's heartbeat, one put per beat (and one at every phase change); and the node's signal
(contract.SIGNALS_PREFIX, its phase in the key), put once when the status first says the attempt ended, so the
controller looks at once."""

from __future__ import annotations

import logging
from collections.abc import Callable

from orchestrator.contract import ENDED_PHASES, GpuStat, Phase, signal_for
from orchestrator.providers.tencent.errors import CloudError
from orchestrator.providers.tencent.storage import ObjectStore

from .status import StatusBoard

log = logging.getLogger("cvmjob-agent")


class Heartbeat:
    def __init__(self, board: StatusBoard, store: ObjectStore, key: str,
                 gpu_stats: Callable[[], list[GpuStat]], signal_key: str | None = None) -> None:
        self.board = board
        self.store = store
        self.key = key
        self.gpu_stats = gpu_stats
        self.signal_key = signal_key
        self._signalled: Phase | None = None

    def tick(self) -> None:
        status = self.board.snapshot(self.gpu_stats())
        self.store.put_json(self.key, status.model_dump(mode="json"))
        if self.signal_key is None or status.phase not in ENDED_PHASES or status.phase == self._signalled:
            return
        try:
            self.store.put_json(signal_for(self.signal_key, status.phase),
                                {"phase": status.phase.value, "time": status.time})
        except CloudError as exc:  # the status is written: the controller's regular look still sees it
            log.warning("could not signal the controller (%s): it sees the status at its next look", exc)
        self._signalled = status.phase
