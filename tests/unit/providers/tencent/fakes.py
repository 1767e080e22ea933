"""A stand-in for ``TencentSdk.call`` that serves a fixed list a page at a time, as Offset/Limit APIs do."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class PagedList:
    """Answers ``action`` with ``items[Offset:Offset+Limit]`` under ``items_key``; ``total`` is the count it
    states (the list's length unless told otherwise, None: it states none). Every call is recorded."""

    items: list[dict[str, Any]]
    items_key: str
    total_key: str = "TotalCount"
    total: int | None = -1
    calls: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)

    def call(self, service: str, action: str, params: dict[str, Any]) -> dict[str, Any]:
        self.calls.append((service, action, params))
        offset, limit = params["Offset"], params["Limit"]
        answer: dict[str, Any] = {self.items_key: self.items[offset : offset + limit]}
        if self.total is not None:
            answer[self.total_key] = len(self.items) if self.total == -1 else self.total
        return answer

    @property
    def offsets(self) -> list[int]:
        return [params["Offset"] for _, _, params in self.calls]
