"""The agent's read of the job's secrets: the values of the names the spec lists, from the key its config gives;
anything short of that ends the attempt in setup with a reason that names keys and names, never a value."""

from __future__ import annotations

import pytest

from orchestrator.agent.errors import AttemptEnded
from orchestrator.agent.secrets import read_secrets
from orchestrator.contract import Outcome, SecretsDoc
from orchestrator.providers.tencent import errors
from tests.unit.agent.fakes import MemoryStore

KEY = "cvmjob/job-1/secrets.json"
VALUE = "hf-0123456789abcdef"


def stored(values: dict[str, str]) -> MemoryStore:
    store = MemoryStore()
    store.put_json(KEY, SecretsDoc(values=values).model_dump(mode="json"))
    return store


def ended(store: MemoryStore, key: str | None, names: list[str]) -> str:
    with pytest.raises(AttemptEnded) as caught:
        read_secrets(store, key, names)
    assert caught.value.outcome == Outcome.SETUP_FAILED
    assert VALUE not in caught.value.reason
    return caught.value.reason


def test_the_named_values_are_read_and_nothing_more() -> None:
    store = stored({"HF_TOKEN": VALUE, "WANDB_API_KEY": "w", "OLD": "o"})
    assert read_secrets(store, KEY, ["HF_TOKEN", "WANDB_API_KEY"]) == {"HF_TOKEN": VALUE, "WANDB_API_KEY": "w"}


def test_a_job_without_secrets_reads_nothing() -> None:
    store = MemoryStore()
    store.get_bytes = None  # a read would fail
    assert read_secrets(store, None, []) == {}


def test_a_missing_document_name_or_key_ends_the_attempt_in_setup() -> None:
    assert ended(MemoryStore(), KEY, ["HF_TOKEN"]) == \
        f"{KEY} is missing (it is put at submission, so it was deleted since): submit the job again"
    assert ended(stored({"HF_TOKEN": VALUE}), KEY, ["HF_TOKEN", "WANDB_API_KEY"]) == \
        f"{KEY} has no value for WANDB_API_KEY: submit the job again"
    assert "gives no secrets_key" in ended(stored({"HF_TOKEN": VALUE}), None, ["HF_TOKEN"])


def test_a_document_that_is_not_ours_is_said_without_its_content() -> None:
    store = MemoryStore()
    store.put_json(KEY, {"values": {"HF_TOKEN": VALUE}, "extra": VALUE})  # pydantic would quote the input
    assert ended(store, KEY, ["HF_TOKEN"]) == f"{KEY} is not a secrets document of this release: submit the job again"
    store.objects[KEY] = b"{" + VALUE.encode()
    assert "not a secrets document" in ended(store, KEY, ["HF_TOKEN"])
    store.objects[KEY] = b" " * (2 * 1024 * 1024)
    assert "larger than a secrets document may be" in ended(store, KEY, ["HF_TOKEN"])


def test_cos_refusing_the_read_ends_the_attempt_naming_the_key() -> None:
    store = MemoryStore()

    def refused(key: str, limit: int | None = None) -> bytes | None:
        raise errors.AuthError("AccessDenied", "access denied")

    store.get_bytes = refused
    assert ended(store, KEY, ["HF_TOKEN"]).startswith(f"reading the job's secrets at {KEY} failed: ")
