"""Where cvmjob keeps its own files: ``$CVMJOB_HOME`` (default ``~/.cvmjob``)."""

from __future__ import annotations

import os
from pathlib import Path

from .errors import CvmjobError


class HomeError(CvmjobError):
    """$CVMJOB_HOME is not a folder cvmjob can use."""


def cvmjob_home() -> Path:
    """The folder, created if missing."""
    home = Path(os.environ.get("CVMJOB_HOME") or Path.home() / ".cvmjob")
    try:
        home.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        why = "it is a file" if home.is_file() else (exc.strerror or str(exc))
        hint = "set CVMJOB_HOME to a folder you can write"
        raise HomeError(f"{home} cannot hold cvmjob's files ({why}): {hint}") from exc
    return home


def state_db() -> Path:
    """The embedded store's SQLite file."""
    return cvmjob_home() / "state.db"


def store_url() -> str:
    """Where the state store is: ``$CVMJOB_DB`` when set (a ``postgresql://`` or ``sqlite://`` URL, or a path of a
    SQLite file), else the embedded file, ``$CVMJOB_HOME/state.db``."""
    return os.environ.get("CVMJOB_DB") or str(state_db())
