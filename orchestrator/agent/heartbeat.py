"""status.json: the agent's heartbeat, one put per beat (and one at every phase change)."""

from __future__ import annotations

from collections.abc import Callable

from orchestrator.contract import GpuStat
from orchestrator.providers.tencent.storage import ObjectStore

from .status import StatusBoard


class Heartbeat:
    def __init__(self, board: StatusBoard, store: ObjectStore, key: str,
                 gpu_stats: Callable[[], list[GpuStat]]) -> None:
        self.board = board
        self.store = store
        self.key = key
        self.gpu_stats = gpu_stats

    def tick(self) -> None:
        status = self.board.snapshot(self.gpu_stats())
        self.store.put_json(self.key, status.model_dump(mode="json"))
