"""Where a spec's field came from, for its errors: the ``--set`` argument that set it, or its ``file:line:col``."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from orchestrator.spec.overrides import override_path
from orchestrator.spec.yamlfile import Position

_KEY = "[key]"  # pydantic's location marker for an error in a mapping's key


@dataclass(frozen=True)
class Sources:
    """A spec file's field positions and the overrides applied over it, in order."""

    file: str
    positions: dict[tuple[str, ...], Position] = field(default_factory=dict)
    overrides: Sequence[str] = ()

    def of(self, loc: Sequence[int | str]) -> str:
        """Where the field at pydantic's ``loc`` was written. The last ``--set`` on it, inside it or around it
        (``--set instance.need=…`` for a problem of ``instance``); else the nearest field of the file that holds it
        (a missing field: its mapping); else the file."""
        path = tuple(str(part) for part in loc if part != _KEY)
        for override in reversed(self.overrides):
            parts = override_path(override)
            if path and parts is not None and (path[: len(parts)] == parts or parts[: len(path)] == path):
                return f"--set {override}"
        for depth in range(len(path), 0, -1):
            if (position := self.positions.get(path[:depth])) is not None:
                return f"{self.file}:{position[0]}:{position[1]}"
        return self.file
