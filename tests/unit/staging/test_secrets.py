"""The values of a job's secrets, read from the submitting machine's environment: every name set, or one line that
names each missing one and the fix; the agents are told the one key that holds them, the values nowhere else."""

from __future__ import annotations

import json

import pytest

from orchestrator.contract import SecretsDoc, TemporaryKeys
from orchestrator.errors import EXIT_BAD_INPUT
from orchestrator.staging.agent_config import agent_configs
from orchestrator.staging.secrets import SecretsMissing, gather
from tests.records import TARGET, plan, spec
from tests.unit.staging.test_agent_config import PLACEMENT, STATE

VALUE = "wandb-0123456789abcdef"


def test_every_named_variable_is_read() -> None:
    doc = gather(["WANDB_API_KEY", "HF_TOKEN"], {"WANDB_API_KEY": VALUE, "HF_TOKEN": "hf", "OTHER": "x"})
    assert doc.values == {"WANDB_API_KEY": VALUE, "HF_TOKEN": "hf"}
    assert VALUE not in repr(doc) and VALUE not in str(doc)  # a log line or traceback that shows it hides them
    assert gather([], {}).values == {}


def test_missing_or_empty_variables_are_one_line_naming_each_and_the_fix() -> None:
    with pytest.raises(SecretsMissing) as caught:
        gather(["WANDB_API_KEY", "HF_TOKEN", "SET"], {"HF_TOKEN": "", "SET": "x"})
    said = str(caught.value)
    assert said.startswith("secrets: WANDB_API_KEY, HF_TOKEN are not set (or empty) in this environment")
    assert "export WANDB_API_KEY=<value> before `cvmjob run`" in said and "drop them" in said and "\n" not in said
    assert caught.value.exit_code == EXIT_BAD_INPUT  # nothing was created
    with pytest.raises(SecretsMissing, match=r"^secrets: HF_TOKEN is not set .* drop it from"):
        gather(["HF_TOKEN"], {})


def test_the_agents_are_told_the_key_of_the_values_and_the_names_only() -> None:
    keys = TemporaryKeys(secret_id="id", secret_key="key", token="t", expires_at=1)
    named = spec(secrets=["WANDB_API_KEY"], train={"command": "python train.py", "nnodes": 2})
    configs = agent_configs("job-1", named, plan(state_bucket=STATE), TARGET, 2, PLACEMENT, keys, "https://c")
    assert [c.secrets_key for c in configs] == ["cvmjob/job-1/secrets.json"] * 2
    assert configs[0].spec["secrets"] == ["WANDB_API_KEY"]
    [none] = agent_configs("job-1", spec(), plan(state_bucket=STATE), TARGET, 1, PLACEMENT, keys, "https://c")
    assert none.secrets_key is None


def test_the_document_round_trips_as_the_agent_reads_it() -> None:
    doc = gather(["WANDB_API_KEY"], {"WANDB_API_KEY": VALUE})
    assert SecretsDoc.model_validate_json(json.dumps(doc.model_dump(mode="json"))) == doc
