"""Durations written as ``90s``, ``30m``, ``2h``, ``1h30m``, ``1d`` or a whole number of seconds.

A parsed duration is an ``int`` of seconds; that is also how it is serialised, so a spec read back from its
canonical JSON (spec.json) validates to the same value.
"""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator, BeforeValidator, WithJsonSchema

MINUTE = 60
HOUR = 60 * MINUTE
DAY = 24 * HOUR

_UNITS = {"d": DAY, "h": HOUR, "m": MINUTE, "s": 1}
# Units in decreasing size, each at most once: "1h30m" but not "30m1h" or "1m1m".
_FORM = re.compile(r"(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?")
# The same rule for editors (ECMA-262 regex): digits alone are seconds.
DURATION_PATTERN = r"^(?:[0-9]+|(?=[0-9])(?:[0-9]+d)?(?:[0-9]+h)?(?:[0-9]+m)?(?:[0-9]+s)?)$"
_EXPECTED = "expected a duration like 90s, 30m, 2h, 1h30m, 1d or whole seconds"


def parse_duration(value: object) -> int:
    """Seconds in ``value`` (a duration string or an int of seconds); ValueError says the accepted forms."""
    if isinstance(value, int) and not isinstance(value, bool):
        if value < 0:
            raise ValueError(f"{value} is negative. {_EXPECTED}")
        return value
    if isinstance(value, str):
        text = value.strip()
        if text.isdigit():
            return int(text)
        match = _FORM.fullmatch(text)
        if text and match is not None:
            amounts = zip(match.groups(), _UNITS.values(), strict=True)
            return sum(int(amount) * seconds for amount, seconds in amounts if amount)
    raise ValueError(f"{value!r} is not a duration. {_EXPECTED} (units in the order d, h, m, s)")


def format_duration(seconds: int) -> str:
    """The shortest spelling of ``seconds`` in the accepted form: 5400 -> "1h30m"."""
    if seconds == 0:
        return "0s"
    parts = []
    for unit, size in _UNITS.items():
        amount, seconds = divmod(seconds, size)
        if amount:
            parts.append(f"{amount}{unit}")
    return "".join(parts)


def within(minimum: int, maximum: int) -> AfterValidator:
    """A bound for a ``Duration`` field, reported in duration units ("allowed 1m..30d")."""

    def check(seconds: int) -> int:
        if not minimum <= seconds <= maximum:
            raise ValueError(
                f"{format_duration(seconds)} is out of range. allowed {format_duration(minimum)}"
                f"..{format_duration(maximum)}"
            )
        return seconds

    return AfterValidator(check)


Duration = Annotated[
    int,
    BeforeValidator(parse_duration),
    WithJsonSchema(
        {
            "anyOf": [
                {"type": "string", "pattern": DURATION_PATTERN},
                {"type": "integer", "minimum": 0},
            ],
            "examples": ["30m", "1h30m", 90],
        },
        mode="validation",
    ),
]
"""Seconds, written in a spec as ``90s``, ``30m``, ``2h``, ``1h30m``, ``1d`` or an int of seconds."""
