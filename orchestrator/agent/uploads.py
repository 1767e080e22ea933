"""Files up to COS, many at once: what the checkpoint uploader and the outputs share.

The small files go up together from one event loop (ObjectStore.upload_many: a checkpoint or an outputs folder of
thousands of small files was a thread's HTTP exchange each, the threads handing the GIL around); the large ones
(multipart, parts in parallel), and any small one that failed there, go on threads with the usual retries. Every
file is verified against the CRC-64 COS reports, and read once.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from orchestrator.providers.tencent.storage import SMALL_FILE, ObjectInfo, ObjectStore, Sending

from .retry import retrying

FILES_IN_FLIGHT = 32  # small files in one event loop at once


def upload_files(store: ObjectStore, files: list[tuple[Path, str]], threads: int,
                 thread_name: str) -> dict[str, ObjectInfo]:
    """Each (path, key) of ``files`` to its key; returns each key's object as COS holds it."""
    sent: dict[str, ObjectInfo] = {}

    def put(sending: Sending, info: ObjectInfo) -> None:
        sent[sending.key] = info

    small = [Sending(path, key) for path, key in files if path.stat().st_size <= SMALL_FILE]
    store.upload_many(small, put, concurrency=FILES_IN_FLIGHT)  # what failed there is sent again below

    def send(item: tuple[Path, str]) -> None:
        path, key = item
        sent[key] = retrying(f"upload {key}", lambda: store.upload_file(path, key))

    with ThreadPoolExecutor(max_workers=threads, thread_name_prefix=thread_name) as pool:
        list(pool.map(send, [(path, key) for path, key in files if key not in sent]))
    return sent
