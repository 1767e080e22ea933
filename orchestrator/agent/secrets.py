"""The job's secrets (AgentConfig.secrets_key): read once an attempt from the state bucket with the agent's scoped
keys, held in memory, and put in the training's environment alone. No log line, status, result or file of the agent
carries a value; what goes wrong is said by key and name only."""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import ValidationError

from orchestrator.contract import AGENT_DOC_LIMIT, Outcome, SecretsDoc
from orchestrator.providers.tencent.errors import CloudError
from orchestrator.providers.tencent.storage import ObjectStore, ObjectTooLarge

from .errors import AttemptEnded
from .retry import retrying


def read_secrets(store: ObjectStore, key: str | None, names: Sequence[str]) -> dict[str, str]:
    """The values of ``names`` from ``key`` (none when the job names no secrets). A document that is missing,
    unreadable or short of a name ends the attempt in setup: a training without its token would fail later, or
    worse, run and log nothing where the user looks."""
    if not names:
        return {}
    if key is None:
        raise _failed(f"the job names secrets ({', '.join(names)}) but this agent's config gives no secrets_key")
    try:
        # Capped: the training's keys can write the job's prefix too (decode.AGENT_DOC_LIMIT).
        data = retrying(f"read {key}", lambda: store.get_bytes(key, limit=AGENT_DOC_LIMIT))
    except ObjectTooLarge:
        raise _failed(f"{key} is larger than a secrets document may be: submit the job again") from None
    except CloudError as exc:
        raise _failed(f"reading the job's secrets at {key} failed: {exc}") from exc
    if data is None:
        raise _failed(f"{key} is missing (it is put at submission, so it was deleted since): submit the job again")
    try:
        doc = SecretsDoc.model_validate_json(data)
    except ValidationError:  # bad JSON too
        # Not from the exception: pydantic's message quotes the input, which holds the values.
        raise _failed(f"{key} is not a secrets document of this release: submit the job again") from None
    missing = [name for name in names if name not in doc.values]
    if missing:
        raise _failed(f"{key} has no value for {', '.join(missing)}: submit the job again")
    return {name: doc.values[name] for name in names}


def _failed(reason: str) -> AttemptEnded:
    return AttemptEnded(Outcome.SETUP_FAILED, reason)
