"""Outputs: every file under $CVMJOB_OUTPUT_DIR, uploaded (verified) to the outputs location at the end.

Every node uploads its own folder to the same place: scripts write outputs on one rank (rank 0) only, as the
quickstart does; files of the same name from several nodes would overwrite each other.
"""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from orchestrator.providers.tencent.storage import ObjectStore

from .retry import retrying

log = logging.getLogger(__name__)


def upload_outputs(directory: Path, store: ObjectStore, prefix: str) -> int:
    """The number of files uploaded."""
    files = sorted(p for p in directory.rglob("*") if p.is_file()) if directory.is_dir() else []

    def send(path: Path) -> None:
        key = prefix + path.relative_to(directory).as_posix()
        retrying(f"upload {key}", lambda: store.upload_file(path, key))

    with ThreadPoolExecutor(max_workers=4, thread_name_prefix="outputs") as pool:
        list(pool.map(send, files))
    log.info("outputs: %d files uploaded to cos://%s/%s", len(files), store.bucket, prefix)
    return len(files)
