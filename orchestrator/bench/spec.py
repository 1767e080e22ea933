"""TYPE and the `cvmjob bench` options to the bench job's spec (pure): a job like any other, on that type.

The job syncs the bench data object (the COS → NVMe rate comes from that sync, as the agent records it), then runs
``python -m orchestrator.bench.workload`` under torchrun (the agent wheel brings the package to every instance:
no workdir files are needed), which times ResNet-50 on one process and on all of them and reads the synced data
back, and writes its report to the outputs folder, uploaded at the end like any job's outputs.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from typing import Literal

from ..spec import JobSpec
from .errors import GpusError
from .results import BENCH_PREFIX, REPORT_NAME

Billing = Literal["on-demand", "spot"]
Precision = Literal["auto", "bf16", "fp16", "fp32"]
DATA_TARGET = "bench"  # under $CVMJOB_DATA_DIR
# The bench data object: big enough on a real cloud for a rate that is not all latency, small on the emulator,
# whose instances are local processes sharing this machine's disk.
DATA_MIB = {"tencent": 256, "emulator": 4}
MAX_RUNTIME = "1h"


@dataclass(frozen=True)
class Phases:
    """``--gpus``: measure one GPU (``single``), and DDP over ``ddp`` GPUs ("auto": all of the node's)."""

    single: bool
    ddp: int | Literal["auto"] | None

    @classmethod
    def parse(cls, text: str) -> Phases:
        """"1,all" (the default), "1", "all", "1,4", "8": 1 is the single-GPU phase, anything else the DDP one."""
        single = False
        ddp: int | Literal["auto"] | None = None
        for item in (i.strip() for i in text.split(",")):
            if item == "1":
                single = True
            elif item in ("all", "N") and ddp is None:
                ddp = "auto"
            elif item.isdigit() and int(item) > 1 and ddp is None:
                ddp = int(item)
            else:
                raise GpusError(f"--gpus {text}: use 1 (one GPU), all (every GPU, DDP) or a count, e.g. 1,all")
        return cls(single, ddp)

    @property
    def phase(self) -> Literal["single", "ddp", "all"]:
        if self.ddp is None:
            return "single"
        return "all" if self.single else "ddp"

    @property
    def nproc_per_node(self) -> int | Literal["auto"]:
        return 1 if self.ddp is None else self.ddp


@dataclass(frozen=True)
class BenchOptions:
    instance_type: str
    region: str
    billing: Billing = "on-demand"
    phases: Phases = Phases(single=True, ddp="auto")
    precision: Precision = "auto"
    batch_size: int | None = None  # None: the workload's default for the device it finds
    steps: int | None = None


def data_key(mib: int) -> str:
    return f"{BENCH_PREFIX}data/{mib}mib/bench.bin"


def job_name(instance_type: str) -> str:
    return ("bench-" + re.sub(r"[^a-z0-9]+", "-", instance_type.lower())).strip("-")[:40].rstrip("-")


def workload_command(options: BenchOptions) -> str:
    args = ["python", "-m", "orchestrator.bench.workload", "--phase", options.phases.phase,
            "--precision", options.precision]
    if options.batch_size is not None:
        args += ["--batch-size", str(options.batch_size)]
    if options.steps is not None:
        args += ["--steps", str(options.steps)]
    # Left unquoted: bash expands them on the instance (the launcher runs the line through bash).
    return shlex.join(args) + f" --read $CVMJOB_DATA_DIR/{DATA_TARGET} --out $CVMJOB_OUTPUT_DIR/{REPORT_NAME}"


def bench_spec(options: BenchOptions, bucket: str, data_mib: int) -> JobSpec:
    """The bench job: ``bucket`` holds the bench data object of ``data_mib`` MiB (`cvmjob bench` puts it there)."""
    return JobSpec.model_validate({
        "name": job_name(options.instance_type),
        "region": options.region,
        "instance": {"type": options.instance_type},
        "billing": {"mode": options.billing},
        "data": [{"source": f"cos://{bucket}/{data_key(data_mib).rpartition('/')[0]}/", "target": DATA_TARGET}],
        "train": {"command": workload_command(options), "nproc_per_node": options.phases.nproc_per_node,
                  # One CPU process: on CPUs the figures are labelled tiny anyway, and more processes only share
                  # the same cores.
                  "cpu_nproc": 1},
        "snapshot": {"enabled": False},  # a benchmark leaves no image behind
        "limits": {"max_runtime": MAX_RUNTIME},
        "tags": {"cvmjob-bench": "1"},
    })
