"""Where cvmjob keeps its own files: ``$CVMJOB_HOME`` (default ``~/.cvmjob``)."""

from __future__ import annotations

import os
from pathlib import Path


def cvmjob_home() -> Path:
    return Path(os.environ.get("CVMJOB_HOME") or Path.home() / ".cvmjob")


def state_db() -> Path:
    return cvmjob_home() / "state.db"
