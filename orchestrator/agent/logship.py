"""Ships the node's log file to COS in chunks: ``logs/<seq>.log``, every few seconds or each MiB.

While the file grows a chunk ends at its last newline, so lines are rarely split (only text without any
newline, like a progress bar redrawn with \r, is cut where it is); the final flush ships the rest. Shipped bytes
are never sent again: the offset and the next sequence number are saved after each chunk, so a restarted agent
continues where it stopped. A chunk that was put but not recorded (a crash in between) is put again under the
same key with the same bytes.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

from orchestrator.providers.tencent.storage import MiB, ObjectStore

from .paths import write_atomically


class LogShipper:
    def __init__(self, log_path: Path, state_path: Path, store: ObjectStore, key_for: Callable[[int], str],
                 chunk_bytes: int = MiB, every_seconds: float = 5.0) -> None:
        self.log_path = log_path
        self.state_path = state_path
        self.store = store
        self.key_for = key_for
        self.chunk_bytes = chunk_bytes
        self.every_seconds = every_seconds
        state = json.loads(state_path.read_text()) if state_path.exists() else {}
        self.offset: int = state.get("offset", 0)
        self.seq: int = state.get("seq", 0)
        self._shipped_at = time.monotonic()

    def tick(self, final: bool = False) -> None:
        size = self.log_path.stat().st_size if self.log_path.exists() else 0
        timely = time.monotonic() - self._shipped_at >= self.every_seconds
        while size > self.offset:
            pending = size - self.offset
            if not (final or timely or pending >= self.chunk_bytes):
                return
            with self.log_path.open("rb") as f:
                f.seek(self.offset)
                data = f.read(min(pending, self.chunk_bytes))
            cut = data.rfind(b"\n")
            if not final and cut >= 0:
                data = data[: cut + 1]
            self.store.put_bytes(self.key_for(self.seq), data, "text/plain")
            self.offset += len(data)
            self.seq += 1
            write_atomically(self.state_path, json.dumps({"offset": self.offset, "seq": self.seq}).encode())
            self._shipped_at = time.monotonic()
            timely = False  # what is left waits for a full chunk or the next interval
