"""How cvmjob writes a length of time for people, wherever it shows one (the CLI, the CI summary)."""

from __future__ import annotations


def duration(seconds: float) -> str:
    """``4m12s``, ``1h02m05s``, ``59s`` (whole seconds)."""
    h, rem = divmod(int(seconds), 3600)
    m, s = divmod(rem, 60)
    return f"{h}h{m:02d}m{s:02d}s" if h else f"{m}m{s:02d}s" if m else f"{s}s"
