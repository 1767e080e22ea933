"""`cvmjob bench` on the emulator: the CPU path of the benchmark, through the CLI and the whole life cycle, then
`cvmjob bench compare` ranking what it stored."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from orchestrator.bench.results import CPU_LABEL
from tests.e2e.conftest import Cli

pytestmark = pytest.mark.e2e


def test_bench_of_a_cpu_type_reports_images_per_second_and_their_cost_and_compare_ranks_it(
        cli: Cli, tmp_path: Path) -> None:
    # A deadline, not a speed bound: ResNet-50 on two CPU processes under torchrun took 240 s in a loaded CI run.
    ran = cli.run("bench", "S5.MEDIUM4", "--steps", "1", "--output", "json", timeout=480)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    result = json.loads(ran.stdout)
    assert (result["type"], result["billing"], result["device"], result["label"]) == (
        "S5.MEDIUM4", "on-demand", "cpu", CPU_LABEL)
    assert result["images_per_s_1"] > 0 and result["images_per_s_all"] > 0
    assert result["cny_per_hour"] > 0 and result["cny_per_million_images"] > 0
    assert result["scaling_efficiency"] is None and result["gpu_utilisation"] is None
    assert result["cos_to_nvme_mb_s"] > 0 and result["nvme_read_mb_s"] > 0  # the synced bench object, read back

    png = tmp_path / "compare.png"
    # A deadline, not a speed bound: matplotlib's import and the PNG took over 60 s on two loaded cores.
    compared = cli.run("bench", "compare", "--png", str(png), "--output", "json", timeout=240)
    assert compared.returncode == 0, compared.stderr
    listed = json.loads(compared.stdout)
    assert [r["job_id"] for r in listed["results"]] == [result["job_id"]]
    assert png.read_bytes().startswith(b"\x89PNG")
