"""The bench arithmetic (cost, scaling, rates), the ranking, and the documents' round trip."""

from __future__ import annotations

import pytest

from orchestrator.bench.results import (
    BenchResult,
    WorkloadReport,
    cny_per_million_images,
    rank,
    rate_mb_s,
    scaling_efficiency,
)
from orchestrator.contract import Result


def test_cost_per_million_images_is_the_hours_a_million_take_at_the_price() -> None:
    # 1000 images/s is 3.6 million images an hour, for 36 CNY: 10 CNY a million.
    assert cny_per_million_images(36.0, 1000.0) == pytest.approx(10.0)
    assert cny_per_million_images(None, 1000.0) is None and cny_per_million_images(36.0, 0.0) is None


def test_scaling_efficiency_is_n_gpus_over_n_times_one() -> None:
    assert scaling_efficiency(1000.0, 7200.0, 8, "gpu") == pytest.approx(0.9)
    assert scaling_efficiency(1000.0, 1000.0, 1, "gpu") is None  # one GPU: nothing scales
    assert scaling_efficiency(10.0, 18.0, 2, "cpu") is None  # CPU processes share the cores
    assert scaling_efficiency(None, 7200.0, 8, "gpu") is None  # --gpus all: no single phase


def test_rates_are_megabytes_per_second() -> None:
    assert rate_mb_s(256 * 10**6, 2.0) == pytest.approx(128.0)
    assert rate_mb_s(0, 2.0) is None and rate_mb_s(10, None) is None and rate_mb_s(10, 0.0) is None


def result(job: str, type_: str, cost: float | None, rate: float, at: float = 0.0) -> BenchResult:
    return BenchResult(job_id=job, time=at, target="emulator", type=type_, region="ap-guangzhou",
                       zone="ap-guangzhou-3", billing="on-demand", device="gpu", gpus=8, precision="bf16",
                       batch_size=256, image_size=224, images_per_s_1=rate / 8, images_per_s_all=rate,
                       scaling_efficiency=1.0, gpu_utilisation=95.0, cny_per_hour=None,
                       cny_per_million_images=cost, nvme_read_mb_s=None, cos_to_nvme_mb_s=None)


def test_compare_ranks_the_cheapest_per_million_images_first_then_the_fastest_the_uncosted_last() -> None:
    ranked = rank([result("a", "A", 9.0, 100), result("b", "B", None, 900), result("c", "C", 3.0, 50),
                   result("d", "D", 3.0, 80), result("e", "E", None, 1000)])
    assert [r.job_id for r in ranked] == ["d", "c", "a", "e", "b"]


def test_compare_keeps_the_newest_result_of_each_type() -> None:
    ranked = rank([result("new", "A", 9.0, 100, at=2.0), result("old", "A", 1.0, 100, at=1.0)])
    assert [r.job_id for r in ranked] == ["new"]


def test_documents_round_trip_and_older_agent_results_decode() -> None:
    stored = result("job-0123abcd", "GN7.2XLARGE32", 4.5, 300)
    assert BenchResult.model_validate_json(stored.model_dump_json()) == stored
    report = WorkloadReport(device="cpu", world=1, precision="fp32", batch_size=2, image_size=32, steps=2,
                            channels_last=True, images_per_s_1=2.0, images_per_s_all=2.5)
    assert WorkloadReport.model_validate(report.model_dump(mode="json")) == report
    older = Result.model_validate({"attempt": 1, "node_rank": 0, "instance_id": "ins-1", "outcome": "succeeded",
                                   "time": 1.0})
    assert (older.sync_bytes, older.sync_seconds) == (0, None)
