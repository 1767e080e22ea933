"""Documents another process wrote, decoded once at the edge: the model, or why they are not one (never an
exception, whatever the bytes), read no larger than their writer writes."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from .base import LAYOUT_VERSION
from .reports import Result, Status

# The most of a status or a result that is read: an agent writes a few KiB (a result's log tail is at most 64 KiB of
# text, a few times that JSON-escaped; a status carries RECENT_METRICS reports of the training's metrics). More is
# not an agent's document, and reading it whole would hold whatever the training put there in memory.
AGENT_DOC_LIMIT = 1024 * 1024
_SAID = 160  # characters of the document's own text (a field's name, an instance id) a reason repeats at most


class UnreadWhy(str, Enum):
    TOO_LARGE = "too large"
    NOT_JSON = "not JSON"
    WRONG_SHAPE = "wrong shape"
    NOT_THIS_NODES = "not this node's"


@dataclass(frozen=True)
class Unread:
    """An agent document that is there but is not taken for one: as good as absent, and why (said once in the
    job's events: a training that keeps writing garbage must not add an event every round)."""

    key: str
    why: UnreadWhy
    detail: str  # printable, one line, short: it may repeat what the training wrote

    def describe(self, verdict: str = "taken as absent") -> str:
        return f"{self.key}: {self.detail}; {verdict}"


_Doc = TypeVar("_Doc", bound=BaseModel)
_NodeDoc = TypeVar("_NodeDoc", Status, Result)


def _printable(text: str) -> str:
    cut = "".join(c if c.isprintable() else "?" for c in text[:_SAID])
    return cut + ("..." if len(text) > _SAID else "")


def too_large(key: str, size: int | None, limit: int) -> Unread:
    said = f"{size} bytes, " if size is not None else ""
    return Unread(key, UnreadWhy.TOO_LARGE, f"{said}more than the {limit} bytes an agent writes")


def decode_doc(key: str, data: bytes, model: type[_Doc], limit: int) -> _Doc | Unread:
    """``data`` as a ``model``, or why it is not one: never an exception, whatever the bytes."""
    if len(data) > limit:
        return too_large(key, len(data), limit)
    try:
        return model.model_validate_json(data)  # no recursion limit to hit: a "[[[[..." is invalid JSON here
    except ValidationError as exc:
        first = exc.errors(include_url=False, include_input=False, include_context=False)[0]
        if first["type"] == "json_invalid":
            return Unread(key, UnreadWhy.NOT_JSON, "not JSON")
        where = ".".join(str(part) for part in first["loc"]) or "the document"
        return Unread(key, UnreadWhy.WRONG_SHAPE,
                      f"not a {model.__name__.lower()} of layout {LAYOUT_VERSION} ({_printable(where)}: "
                      f"{_printable(first['msg'])})")


def decode_agent_doc(key: str, data: bytes, model: type[_NodeDoc], attempt: int, node: int,
                     instance_id: str | None) -> _NodeDoc | Unread:
    """A node's status or result, taken only when it is the one expected there: of ``attempt``, ``node`` and, unless
    ``instance_id`` is None (a reader that does not know the node's instance: `cvmjob status`), of that instance.
    The three fields have been in both documents since layout 1: no earlier document lacks them."""
    doc = decode_doc(key, data, model, AGENT_DOC_LIMIT)
    if isinstance(doc, Unread):
        return doc
    if (doc.attempt, doc.node_rank) != (attempt, node):
        return Unread(key, UnreadWhy.NOT_THIS_NODES,
                      f"written as attempt {doc.attempt} node {doc.node_rank}'s, not attempt {attempt} node {node}'s")
    if instance_id is not None and doc.instance_id != instance_id:
        return Unread(key, UnreadWhy.NOT_THIS_NODES,
                      f"written by instance {_printable(doc.instance_id)}, not by the node's {instance_id}")
    return doc
