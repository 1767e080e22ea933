"""The bench documents and their arithmetic (pure).

``WorkloadReport`` is what the workload writes to its outputs (``bench.json``, uploaded by the agent like any
output); ``BenchResult`` is what `cvmjob bench` makes of it with the placement's price and the agent's data sync,
stored in the state bucket under ``cvmjob/_bench/results/`` (a team sharing the bucket shares the ranking, as it
shares the jobs' ``job.json``) and ranked by `cvmjob bench compare`.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

from ..contract import ROOT

BENCH_PREFIX = f"{ROOT}/_bench/"  # no job id starts with "_": beside the jobs' folders, never in one
RESULTS_PREFIX = f"{BENCH_PREFIX}results/"
REPORT_NAME = "bench.json"  # under the job's outputs
CPU_LABEL = "CPU (emulator): not a GPU measurement"

Device = Literal["cpu", "gpu"]
Precision = Literal["bf16", "fp16", "fp32"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class WorkloadReport(_Model):
    """What the workload measured on the instance (rank 0 writes it)."""

    device: Device
    gpu_name: str | None = None
    world: int  # processes of the DDP phase (GPUs, or CPU processes)
    precision: Precision
    batch_size: int  # per process
    image_size: int
    steps: int  # timed optimizer steps of each phase
    channels_last: bool
    images_per_s_1: float | None = None  # one process, no DDP; None: the phase was not run
    images_per_s_all: float | None = None  # every process, DDP
    gpu_utilisation: float | None = None  # mean percent over the timed steps of the last phase; None: no reading
    nvme_read_mb_s: float | None = None  # reading the synced bench data back: the page cache may hold it
    nvme_read_bytes: int = 0
    torch: str = ""


class BenchResult(_Model):
    """One bench run of one type, as stored and compared."""

    job_id: str
    time: float
    target: Literal["tencent", "emulator"]
    type: str
    region: str
    zone: str
    billing: str
    device: Device
    label: str = ""  # CPU_LABEL for a CPU measurement
    gpus: int  # the DDP phase's processes
    precision: str
    batch_size: int
    image_size: int
    images_per_s_1: float | None
    images_per_s_all: float | None
    scaling_efficiency: float | None
    gpu_utilisation: float | None
    cny_per_hour: float | None
    cny_per_million_images: float | None
    nvme_read_mb_s: float | None
    cos_to_nvme_mb_s: float | None


def cny_per_million_images(price_per_hour: float | None, images_per_s: float | None) -> float | None:
    """What a million images cost at this price and rate; None when either is unknown (or nothing ran)."""
    if price_per_hour is None or not images_per_s:
        return None
    return price_per_hour / (images_per_s * 3600) * 1e6


def scaling_efficiency(images_per_s_1: float | None, images_per_s_all: float | None, world: int,
                       device: Device) -> float | None:
    """N processes' rate over N times one's: 1.0 is perfect scaling. None on one GPU or on CPUs (CPU processes
    share the cores: their "scaling" says nothing about GPUs)."""
    if device != "gpu" or world < 2 or not images_per_s_1 or images_per_s_all is None:
        return None
    return images_per_s_all / (world * images_per_s_1)


def rate_mb_s(nbytes: int, seconds: float | None) -> float | None:
    """MB/s (10^6 bytes); None when nothing was moved or not timed."""
    if nbytes <= 0 or not seconds or seconds <= 0:
        return None
    return nbytes / 1e6 / seconds


def rank(results: list[BenchResult]) -> list[BenchResult]:
    """The newest result of each measured type (type, billing, GPUs, precision, device), cheapest per million images
    first, then the fastest; results without a cost last, fastest first."""
    newest: dict[tuple[str, str, int, str, str], BenchResult] = {}
    for r in sorted(results, key=lambda r: r.time):
        newest[(r.type, r.billing, r.gpus, r.precision, r.device)] = r
    return sorted(newest.values(), key=lambda r: (r.cny_per_million_images is None, r.cny_per_million_images or 0.0,
                                                  -(r.images_per_s_all or 0.0)))


def result_key(job_id: str) -> str:
    return f"{RESULTS_PREFIX}{job_id}.json"
