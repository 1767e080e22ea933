"""The two time formats CVM speaks.

API fields (CreatedTime, ExpiredTime, ActionTime) are ISO 8601 in UTC, ``YYYY-MM-DDThh:mm:ssZ`` (SDK model
docstrings). Console-style strings (the metadata service's ``spot/termination-time``, DescribeInstancesActionTimer's
StartActionTime/EndActionTime filters) are ``YYYY-MM-DD HH:MM:SS`` in China Standard Time, UTC+8
(shared/reference/tencent-cloud-api.md §3).
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

ISO_FORMAT = "%Y-%m-%dT%H:%M:%SZ"
CST_FORMAT = "%Y-%m-%d %H:%M:%S"
CST = timezone(timedelta(hours=8))


def iso_utc(ts: float) -> str:
    return datetime.fromtimestamp(ts, timezone.utc).strftime(ISO_FORMAT)


def parse_iso_utc(text: str) -> float | None:
    try:
        return datetime.strptime(text, ISO_FORMAT).replace(tzinfo=timezone.utc).timestamp()
    except ValueError:
        return None


def cst_text(ts: float) -> str:
    return datetime.fromtimestamp(ts, CST).strftime(CST_FORMAT)


def parse_cst(text: str) -> float | None:
    try:
        return datetime.strptime(text, CST_FORMAT).replace(tzinfo=CST).timestamp()
    except ValueError:
        return None


def add_months(ts: float, months: int) -> float:
    """A prepaid period's end: the same day ``months`` later, clamped to the month's last day."""
    start = datetime.fromtimestamp(ts, CST)
    month0 = start.month - 1 + months
    year, month = start.year + month0 // 12, month0 % 12 + 1
    next_month = datetime(year + month // 12, month % 12 + 1, 1, tzinfo=CST)
    last_day = (next_month - timedelta(days=1)).day
    return start.replace(year=year, month=month, day=min(start.day, last_day)).timestamp()
