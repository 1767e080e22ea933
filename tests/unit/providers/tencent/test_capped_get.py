"""ObjectStore.get_bytes with a limit, against the emulator: what a writer the reader does not trust put in an object
(the training, in its node's status.json) is not read past the limit (issue 27, item 11)."""

from __future__ import annotations

import uuid

import pytest

from orchestrator.providers.tencent import StaticCredential, TencentSdk
from orchestrator.providers.tencent.errors import TransientError
from orchestrator.providers.tencent.storage import ObjectStore, ObjectTooLarge
from tests.emulator_process import EmulatorProcess

LIMIT = 4096


@pytest.fixture
def store(emulator: EmulatorProcess) -> ObjectStore:
    sdk = TencentSdk(StaticCredential(emulator.secret_id, emulator.secret_key), "ap-guangzhou", emulator.endpoint,
                     emulator.appid)
    store = ObjectStore(sdk, f"capped-{uuid.uuid4().hex[:6]}-{emulator.appid}")
    store.create_bucket()
    return store


def test_an_object_within_the_limit_is_read_whole_and_a_missing_one_is_none(store: ObjectStore) -> None:
    store.put_bytes("doc.json", b"x" * LIMIT)
    assert store.get_bytes("doc.json", LIMIT) == b"x" * LIMIT
    assert store.get_bytes("missing.json", LIMIT) is None


def test_an_object_past_the_limit_is_refused_with_its_size(store: ObjectStore) -> None:
    store.put_bytes("doc.json", b"x" * (LIMIT + 1))
    with pytest.raises(ObjectTooLarge) as refused:
        store.get_bytes("doc.json", LIMIT)
    assert (refused.value.size, refused.value.limit) == (LIMIT + 1, LIMIT)
    assert store.get_bytes("doc.json", LIMIT + 1) == b"x" * (LIMIT + 1)  # the connection was not left half read


def test_its_body_is_not_read_past_the_limit(store: ObjectStore, emulator: EmulatorProcess) -> None:
    """The emulator resets the connection once it has sent one byte past the limit: a reader that went on would
    meet the reset (a TransientError), one that stops there never does."""
    store.put_bytes("doc.json", b"x" * (8 * LIMIT))
    emulator.admin.inject_cos("reset_body", operation="GetObject", bucket=store.bucket, key_prefix="doc.json",
                              after_bytes=LIMIT + 1, count=2)
    with pytest.raises(ObjectTooLarge):
        store.get_bytes("doc.json", LIMIT)
    with pytest.raises(TransientError):  # the fault was there: a whole read meets it
        store.get_bytes("doc.json")
