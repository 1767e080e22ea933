"""Outputs: every file under $CVMJOB_OUTPUT_DIR, uploaded (verified) to the outputs location at the end.

Every node uploads its own folder to the same place: scripts write outputs on one rank (rank 0) only, as the
quickstart does; files of the same name from several nodes would overwrite each other.
"""

from __future__ import annotations

import logging
from pathlib import Path

from orchestrator.providers.tencent.storage import ObjectStore

from .uploads import upload_files

log = logging.getLogger(__name__)


def upload_outputs(directory: Path, store: ObjectStore, prefix: str) -> int:
    """The number of files uploaded."""
    files = sorted(p for p in directory.rglob("*") if p.is_file()) if directory.is_dir() else []
    upload_files(store, [(path, prefix + path.relative_to(directory).as_posix()) for path in files], 4, "outputs")
    log.info("outputs: %d files uploaded to cos://%s/%s", len(files), store.bucket, prefix)
    return len(files)
