"""The bench job's spec: TYPE and options to a JobSpec of the normal life cycle."""

from __future__ import annotations

import pytest

from orchestrator.bench.spec import BenchOptions, GpusError, Phases, bench_spec, data_key, job_name
from orchestrator.spec import JobSpec

BUCKET = "cvmjob-1250000000"


def test_the_default_bench_is_one_gpu_then_all_of_them_on_demand_syncing_the_bench_object() -> None:
    spec = bench_spec(BenchOptions("GN7.20XLARGE320", "ap-guangzhou"), BUCKET, 256)
    assert (spec.name, spec.instance.type, spec.billing.mode) == ("bench-gn7-20xlarge320", "GN7.20XLARGE320",
                                                                 "on-demand")
    (data,) = spec.data
    assert str(data.source) == f"cos://{BUCKET}/{data_key(256).rpartition('/')[0]}/" and data.target == "bench"
    assert spec.train.command == ("python -m orchestrator.bench.workload --phase all --precision auto "
                                  "--read $CVMJOB_DATA_DIR/bench --out $CVMJOB_OUTPUT_DIR/bench.json")
    assert spec.train.nproc_per_node == "auto" and spec.train.cpu_nproc == 1
    assert not spec.snapshot.enabled and spec.outputs.upload_to is None  # the report comes back with the outputs
    # What `cvmjob bench` hands to the planner decodes to the same spec.
    assert JobSpec.model_validate(spec.model_dump(mode="json", exclude_defaults=True)) == spec


def test_options_reach_the_workload_and_the_billing() -> None:
    options = BenchOptions("GT4.41XLARGE948", "ap-shanghai", "spot", Phases.parse("4"), "fp16", 128, 50)
    spec = bench_spec(options, BUCKET, 256)
    assert spec.billing.mode == "spot" and spec.train.nproc_per_node == 4
    assert "--phase ddp --precision fp16 --batch-size 128 --steps 50 " in spec.train.command


@pytest.mark.parametrize(("text", "phases"), [
    ("1,all", Phases(True, "auto")), ("1", Phases(True, None)), ("all", Phases(False, "auto")),
    ("1,8", Phases(True, 8)), ("1,N", Phases(True, "auto"))])
def test_gpus_name_the_phases(text: str, phases: Phases) -> None:
    assert Phases.parse(text) == phases


@pytest.mark.parametrize("text", ["", "0", "2,4", "one", "all,all"])
def test_other_gpus_are_refused(text: str) -> None:
    with pytest.raises(GpusError, match=r"use 1 \(one GPU\), all"):
        Phases.parse(text)


def test_job_names_fit_the_spec() -> None:
    assert job_name("HCCPNV4h.48XLARGE1024") == "bench-hccpnv4h-48xlarge1024"
    assert len(job_name("X" * 60 + ".LARGE")) <= 40
