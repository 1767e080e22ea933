"""One page of a listing: keys rolled up into common prefixes by a delimiter, cut at a maximum count.

Shared by ListObjects (GET Bucket) and ListMultipartUploads; both feed entries already filtered by prefix and
marker, in key order. A common prefix counts as one entry, as in S3 and COS (doc 436/7734).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar


class Keyed(Protocol):
    @property
    def key(self) -> str: ...


T = TypeVar("T", bound=Keyed)


@dataclass(frozen=True)
class Page(Generic[T]):
    entries: list[T]
    prefixes: list[str]
    truncated: bool
    last: T | str | None  # what the page ended with

    @property
    def next_marker(self) -> str:
        """Where a following page starts: the key or common prefix this one ended with."""
        if self.last is None:
            return ""
        return self.last if isinstance(self.last, str) else self.last.key


def common_prefix(key: str, prefix: str, delimiter: str) -> str | None:
    if not delimiter:
        return None
    at = key.find(delimiter, len(prefix))
    return None if at < 0 else key[: at + len(delimiter)]


def paginate(entries: Iterable[T], *, prefix: str, delimiter: str, marker: str, limit: int) -> Page[T]:
    """``marker``: a page that ended on a common prefix hands that prefix back as the marker; keys under it
    then sort after the marker but belong to the page already listed, so they are skipped."""
    listed: list[T] = []
    prefixes: list[str] = []
    last: T | str | None = None
    for entry in entries:
        group = common_prefix(entry.key, prefix, delimiter)
        if group is not None and (group == last or marker.startswith(group)):
            continue
        if len(listed) + len(prefixes) == limit:
            return Page(listed, prefixes, True, last)
        if group is None:
            listed.append(entry)
            last = entry
        else:
            prefixes.append(group)
            last = group
    return Page(listed, prefixes, False, last)
