"""result.json: written once per attempt and node, when the agent is done, after the last logs.

It is first written locally, then uploaded with patient retries (about five minutes): a restarted agent that
finds the local copy only finishes the upload. The log tail saves the controller a trip through the log chunks.
"""

from __future__ import annotations

from pathlib import Path

from orchestrator.contract import Result
from orchestrator.providers.tencent.storage import ObjectStore

from .paths import write_atomically
from .retry import retrying

TAIL_LINES = 50
_TAIL_BYTES = 64 * 1024
_UPLOAD_ATTEMPTS = 15


def log_tail(path: Path, lines: int = TAIL_LINES) -> str:
    if not path.exists():
        return ""
    with path.open("rb") as f:
        f.seek(max(0, path.stat().st_size - _TAIL_BYTES))
        text = f.read().decode(errors="replace")
    return "\n".join(text.splitlines()[-lines:])


def publish(result: Result, local: Path | None, store: ObjectStore, key: str) -> None:
    """result.json to COS, through a local copy first unless ``local`` is None."""
    data = result.model_dump_json().encode()
    if local is not None:
        write_atomically(local, data)
    _upload(data, store, key)


def upload_saved(local: Path, store: ObjectStore, key: str) -> None:
    _upload(local.read_bytes(), store, key)


def _upload(data: bytes, store: ObjectStore, key: str) -> None:
    retrying("write result.json", lambda: store.put_bytes(key, data, "application/json"), attempts=_UPLOAD_ATTEMPTS)
