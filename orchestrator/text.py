"""How cvmjob writes values for people, wherever it shows them (the CLI, the CI summary, a sweep's lines)."""

from __future__ import annotations

from typing import Any


def duration(seconds: float) -> str:
    """``4m12s``, ``1h02m05s``, ``59s`` (whole seconds)."""
    h, rem = divmod(int(seconds), 3600)
    m, s = divmod(rem, 60)
    return f"{h}h{m:02d}m{s:02d}s" if h else f"{m}m{s:02d}s" if m else f"{s}s"


def show_values(values: dict[str, Any]) -> str:
    """Parameters or metrics on one line: ``lr=0.003, hidden=128``."""
    return ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in values.items())
