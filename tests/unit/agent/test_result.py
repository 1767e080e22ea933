"""result.json as the agent writes it: the local copy first, then COS; the metrics the training reported last."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from pydantic import ValidationError

from orchestrator.agent.result import publish, upload_saved
from orchestrator.contract import Outcome, Result
from tests.unit.agent.fakes import MemoryStore


def preempted(**fields: object) -> Result:
    return Result.model_validate({"attempt": 2, "node_rank": 0, "instance_id": "ins-1",
                                  "outcome": Outcome.PREEMPTED, "final_step": 57, "time": time.time(), **fields})


def test_the_metrics_of_a_preempted_attempt_reach_cos_through_the_local_copy(tmp_path: Path) -> None:
    result = preempted(metrics={"val_loss": 0.31, "val_accuracy": 0.88}, metrics_step=49)
    store = MemoryStore()
    publish(result, tmp_path / "result.json", store, "attempts/2/nodes/0/result.json")  # type: ignore[arg-type]
    read = Result.model_validate(store.get_json("attempts/2/nodes/0/result.json"))
    assert (read.metrics, read.metrics_step, read.final_step) == ({"val_loss": 0.31, "val_accuracy": 0.88}, 49, 57)
    again = MemoryStore()  # a restarted agent only finishes the upload, from the local copy
    upload_saved(tmp_path / "result.json", again, "result.json")  # type: ignore[arg-type]
    assert Result.model_validate(again.get_json("result.json")) == read


def test_a_result_without_metrics_reads_as_before() -> None:
    assert (preempted().metrics, preempted().metrics_step) == ({}, None)


@pytest.mark.parametrize("metrics", [{"val_loss": float("nan")}, {"val_loss": float("inf")}, {"ok": True},
                                     {"ok": "0.5"}, {"bad name": 0.5}])
def test_a_result_carries_only_finite_numbers_under_well_formed_names(metrics: dict[str, object]) -> None:
    # JSON has no NaN: a result that held one would reach the controller as null, and not read back.
    with pytest.raises(ValidationError):
        preempted(metrics=metrics)
