from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from orchestrator.spec.durations import format_duration, parse_duration


@pytest.mark.parametrize(("text", "seconds"), [
    ("90s", 90), ("30m", 1800), ("2h", 7200), ("1h30m", 5400), ("1d", 86400), ("1d2h3m4s", 93784), ("90", 90),
    (" 5m ", 300), (0, 0), (3600, 3600),
])
def test_parse(text: object, seconds: int) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("bad", ["", "m", "1.5h", "30m1h", "1m1m", "5 m", "-5m", "1w", -1, True, 1.5, None, [1]])
def test_rejects_with_the_accepted_forms(bad: object) -> None:
    with pytest.raises(ValueError, match="like 90s, 30m, 2h, 1h30m, 1d or whole seconds"):
        parse_duration(bad)


@given(st.integers(min_value=0, max_value=10**9))
def test_format_parses_back(seconds: int) -> None:
    assert parse_duration(format_duration(seconds)) == seconds


def test_format_is_short() -> None:
    assert [format_duration(s) for s in (0, 59, 60, 5400, 86400 + 1)] == ["0s", "59s", "1m", "1h30m", "1d1s"]
