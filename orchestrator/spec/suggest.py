"""Nearest-name suggestions for "did you mean" messages (spec fields, enum values, instance types, policies)."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def suggest(value: str, candidates: Iterable[str], *, cutoff: float = 0.6) -> str | None:
    """The candidate nearest to ``value``, or None when none is close enough.

    Case is ignored when comparing, so ``gn7.2xlarge32`` finds ``GN7.2XLARGE32``; a candidate equal to ``value``
    is never suggested (the caller is asking because ``value`` was rejected).
    """
    by_folded: dict[str, str] = {}
    for candidate in candidates:
        if candidate != value:
            by_folded.setdefault(candidate.casefold(), candidate)
    folded = value.casefold()
    if folded in by_folded:
        return by_folded[folded]
    matches = difflib.get_close_matches(folded, list(by_folded), n=1, cutoff=cutoff)
    return by_folded[matches[0]] if matches else None


def did_you_mean(value: str, candidates: Iterable[str]) -> str:
    """``"did you mean 'X'?"`` for the nearest candidate, or "" when there is none."""
    nearest = suggest(value, candidates)
    return f"did you mean '{nearest}'?" if nearest is not None else ""
