"""``secrets:`` in the spec and ``--secret``: environment variable names only, each once, none of cvmjob's or
torchrun's own, none also in train.env; a bad one is one line naming where it came from."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from orchestrator.spec import JobSpec, SpecError, load_spec
from orchestrator.spec.secrets import with_secrets
from tests.unit.spec.conftest import MINIMAL_SPEC


def test_the_spec_takes_variable_names_and_keeps_their_order(write_spec: Callable[[str], Path]) -> None:
    spec = load_spec(write_spec(MINIMAL_SPEC + "secrets: [WANDB_API_KEY, HF_TOKEN]\n"))
    assert spec.secrets == ("WANDB_API_KEY", "HF_TOKEN")
    assert load_spec(write_spec(MINIMAL_SPEC)).secrets == ()
    assert spec.model_dump(mode="json")["secrets"] == ["WANDB_API_KEY", "HF_TOKEN"]  # names: spec.json, the store


@pytest.mark.parametrize(("secrets", "said"), [
    ("[wandb_key]", "secrets.0: 'wandb_key' is not a valid variable name: use A-Z, 0-9 and _"),
    ("[9LIVES]", "secrets.0: '9LIVES' is not a valid variable name"),
    ("[CVMJOB_TOKEN]", "secrets.0: 'CVMJOB_TOKEN': names starting with CVMJOB_ are set by cvmjob"),
    ("[HF_TOKEN, MASTER_PORT]", "secrets.1: 'MASTER_PORT' is set by torchrun for each worker"),
    ("[HF_TOKEN, HF_TOKEN]", "secrets.1: HF_TOKEN is listed twice"),
    ("[NCCL_DEBUG]", "secrets.0: NCCL_DEBUG is also in train.env, whose values are written in plain text"),
    # A value in the spec is what the field is there to avoid: names only.
    ("{HF_TOKEN: abc}", "secrets: expected a list, got a mapping"),
])
def test_a_bad_name_is_one_line_at_its_field(write_spec: Callable[[str], Path], secrets: str, said: str) -> None:
    text = MINIMAL_SPEC.replace("train: {command: python train.py}",
                                "train: {command: python train.py, env: {NCCL_DEBUG: WARN}}")
    with pytest.raises(SpecError) as caught:
        load_spec(write_spec(text + f"secrets: {secrets}\n"))
    [problem] = caught.value.problems
    assert said in str(problem) and "\n" not in str(problem)


def test_secret_adds_names_once_after_the_specs(write_spec: Callable[[str], Path]) -> None:
    spec = load_spec(write_spec(MINIMAL_SPEC + "secrets: [HF_TOKEN]\n"))
    added = with_secrets(spec, ["WANDB_API_KEY", "HF_TOKEN", "WANDB_API_KEY"])
    assert added.secrets == ("HF_TOKEN", "WANDB_API_KEY")
    assert added.model_copy(update={"secrets": ()}) == spec.model_copy(update={"secrets": ()})  # nothing else moved
    assert with_secrets(spec, []) is spec


@pytest.mark.parametrize(("name", "said"), [
    ("wandb", "--secret: secrets.1: 'wandb' is not a valid variable name"),
    ("CVMJOB_JOB_ID", "--secret: secrets.1: 'CVMJOB_JOB_ID': names starting with CVMJOB_ are set by cvmjob"),
    ("EPOCHS", "--secret: secrets.1: EPOCHS is also in train.env"),
])
def test_a_bad_secret_flag_names_the_flag(write_spec: Callable[[str], Path], name: str, said: str) -> None:
    text = MINIMAL_SPEC.replace("train: {command: python train.py}",
                                "train: {command: python train.py, env: {EPOCHS: 3}}")
    spec = load_spec(write_spec(text + "secrets: [HF_TOKEN]\n"))
    with pytest.raises(SpecError) as caught:
        with_secrets(spec, [name])
    assert str(caught.value).startswith(said), str(caught.value)


def test_the_schema_gives_editors_the_names_rule() -> None:
    field = JobSpec.model_json_schema()["properties"]["secrets"]
    assert field["items"]["pattern"] == "^[A-Z_][A-Z0-9_]*$" and "plain text" in field["description"]
