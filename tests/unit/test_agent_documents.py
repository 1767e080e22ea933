"""Decoding the agents' documents (contract.decode_agent_doc): whatever is in the object, a document of this node
or the reason it is taken as absent; never an exception (the training holds keys that can write these objects)."""

from __future__ import annotations

import json

import pytest

from orchestrator.contract import (
    AGENT_DOC_LIMIT,
    Manifest,
    Outcome,
    Phase,
    Result,
    Status,
    Unread,
    UnreadWhy,
    decode_agent_doc,
    decode_doc,
)

KEY = "cvmjob/job-0000abcd/attempts/2/nodes/1/status.json"
INSTANCE = "ins-aaaaaaaa"


def status(**changes: object) -> bytes:
    fields: dict[str, object] = dict(attempt=2, node_rank=1, instance_id=INSTANCE, phase=Phase.TRAINING, time=5.0,
                                     seq=3, step=9)
    return Status(**{**fields, **changes}).model_dump_json().encode()


def decoded(data: bytes, instance_id: str | None = INSTANCE) -> Status | Unread:
    return decode_agent_doc(KEY, data, Status, attempt=2, node=1, instance_id=instance_id)


def test_the_nodes_own_status_is_decoded() -> None:
    doc = decoded(status())
    assert isinstance(doc, Status) and (doc.step, doc.seq) == (9, 3)


def test_a_status_of_an_earlier_release_without_its_newer_fields_is_still_read() -> None:
    old = {"layout_version": 1, "attempt": 2, "node_rank": 1, "instance_id": INSTANCE, "phase": "training",
           "time": 5.0, "seq": 3}
    assert isinstance(decoded(json.dumps(old).encode()), Status)


@pytest.mark.parametrize(("data", "why", "said"), [
    (b"{not json", UnreadWhy.NOT_JSON, "not JSON"),
    (b"\xff\xfe\x00garbage", UnreadWhy.NOT_JSON, "not JSON"),
    (b"[" * 100_000, UnreadWhy.NOT_JSON, "not JSON"),  # nested past any recursion limit: no RecursionError
    (b"", UnreadWhy.NOT_JSON, "not JSON"),
    (b"[1, 2]", UnreadWhy.WRONG_SHAPE, "not a status"),
    (b"null", UnreadWhy.WRONG_SHAPE, "not a status"),
    (json.dumps({"attempt": "two"}).encode(), UnreadWhy.WRONG_SHAPE, "attempt"),
    (status().replace(b'"training"', b'"napping"'), UnreadWhy.WRONG_SHAPE, "phase"),
    (status(attempt=1), UnreadWhy.NOT_THIS_NODES, "attempt 1"),
    (status(node_rank=0), UnreadWhy.NOT_THIS_NODES, "node 0"),
    (status(instance_id="ins-bbbbbbbb"), UnreadWhy.NOT_THIS_NODES, "ins-bbbbbbbb"),
    (status(message="x" * AGENT_DOC_LIMIT), UnreadWhy.TOO_LARGE, f"{AGENT_DOC_LIMIT} bytes"),
])
def test_a_document_that_is_not_this_nodes_is_taken_as_absent_with_its_reason(data: bytes, why: UnreadWhy,
                                                                                said: str) -> None:
    doc = decoded(data)
    assert isinstance(doc, Unread), doc
    assert (doc.key, doc.why) == (KEY, why)
    assert said in doc.describe() and KEY in doc.describe()


def test_a_reader_that_does_not_know_the_nodes_instance_checks_its_attempt_and_node() -> None:
    assert isinstance(decoded(status(instance_id="ins-bbbbbbbb"), instance_id=None), Status)
    assert isinstance(decoded(status(attempt=1), instance_id=None), Unread)


def test_a_result_of_another_attempt_is_not_this_attempts() -> None:
    other = Result(attempt=7, node_rank=1, instance_id=INSTANCE, outcome=Outcome.TRAINING_FAILED, time=1.0)
    doc = decode_agent_doc(KEY, other.model_dump_json().encode(), Result, attempt=2, node=1, instance_id=INSTANCE)
    assert isinstance(doc, Unread) and doc.why is UnreadWhy.NOT_THIS_NODES and "attempt 7" in doc.describe()


def test_what_the_reason_repeats_of_the_document_is_short_and_on_one_line() -> None:
    """The reason goes into the job's events and onto the user's terminal: the training chose its text."""
    hostile = json.loads(status())
    hostile["\n\x1b[2J" + "k" * 10_000] = 1
    doc = decoded(json.dumps(hostile).encode())
    assert isinstance(doc, Unread) and doc.why is UnreadWhy.WRONG_SHAPE
    text = doc.describe()
    assert len(text) < 400 and text.isprintable(), text


def test_a_document_without_an_owner_is_decoded_by_its_shape_alone() -> None:
    assert isinstance(decode_doc("m", b'{"checkpoints": []}', Manifest, AGENT_DOC_LIMIT), Manifest)
    assert isinstance(decode_doc("m", b'{"checkpoints": 3}', Manifest, AGENT_DOC_LIMIT), Unread)
    assert isinstance(decode_doc("m", b'{"checkpoints": []}', Manifest, limit=5), Unread)
