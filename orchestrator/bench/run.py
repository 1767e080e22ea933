"""The I/O around a bench job: its data object, its plan, its result from the job's outputs, the ``_bench/`` store."""

from __future__ import annotations

import os
import time
from pathlib import Path

from pydantic import ValidationError

from .. import api
from ..contract import JobLayout
from ..errors import CvmjobError
from ..extras import need
from ..providers.tencent.retry import retrying
from ..providers.tencent.storage import ObjectStore
from ..state.home import cvmjob_home
from ..state.machine import JobState
from ..state.store import JobRecord, NodeRecord
from ..target import connect, resolve
from . import results as R
from .spec import DATA_MIB, BenchOptions, bench_spec, data_key


class BenchFailed(CvmjobError):
    """The bench job ended without its report."""

    exit_code = 1


def ensure_data(state: ObjectStore, mib: int) -> None:
    """The bench data object in the state bucket, put once: every later bench of the bucket syncs the same one."""
    key = data_key(mib)
    if not retrying(state.bucket_exists):
        retrying(state.create_bucket)  # a first job of the account creates it too; the bench data comes first
    elif retrying(lambda: state.head(key)) is not None:
        return
    data = os.urandom(mib * 2**20)  # incompressible: nothing on the way makes it cheaper than real data
    retrying(lambda: state.put_bytes(key, data))


def plan(options: BenchOptions, force_emulator: bool) -> api.PlanReport:
    """The bench job's plan (a type the region does not offer fails here, as `cvmjob plan` would)."""
    target = resolve(options.region, force_emulator)
    bucket = api.state_bucket(None, target)
    mib = DATA_MIB[target.kind]
    ensure_data(ObjectStore(connect(target), bucket), mib)
    spec = bench_spec(options, bucket, mib)
    # The job's workdir is an empty folder: the workload is in the agent wheel every instance installs.
    workdir = cvmjob_home() / "bench"
    workdir.mkdir(parents=True, exist_ok=True)
    return api.plan(workdir / "bench.yaml", force_emulator=force_emulator,
                    document=spec.model_dump(mode="json", exclude_defaults=True))


def _ran_on(job: JobRecord, nodes: list[NodeRecord]) -> tuple[str, str, str, float | None]:
    """(type, zone, billing, CNY/hour) of node 0 of the job's last attempt; the plan's first choice before any."""
    last = [n for n in nodes if n.attempt == job.attempt and n.node == 0]
    if last:
        node = last[-1]
        return node.instance_type, node.zone, node.charge_type.billing, node.price_per_hour
    primary = job.plan.primary
    return primary.instance_type, primary.zone, primary.billing, primary.price_per_hour


def result_of(job: JobRecord, nodes: list[NodeRecord], now: float | None = None) -> R.BenchResult:
    """The bench result of a finished bench job, from its report (its outputs) and its agent's data sync."""
    if job.state != JobState.SUCCEEDED:
        raise BenchFailed(f"bench job {job.job_id} ended {job.state.value}: `cvmjob logs {job.job_id}` says why")
    state = api.state_store(job)
    found = retrying(lambda: state.get_json(JobLayout(job.job_id).outputs_prefix + R.REPORT_NAME))
    if found is None:
        raise BenchFailed(f"bench job {job.job_id} succeeded without its report {R.REPORT_NAME}: "
                          f"`cvmjob logs {job.job_id}` shows the workload's output")
    report = R.WorkloadReport.model_validate(found)
    agent = api.agent_view(job).result
    type_, zone, billing, price = _ran_on(job, nodes)
    rate = report.images_per_s_all or report.images_per_s_1
    return R.BenchResult(
        job_id=job.job_id, time=time.time() if now is None else now, target=job.target.kind, type=type_,
        region=job.plan.region, zone=zone, billing=billing, device=report.device,
        label=R.CPU_LABEL if report.device == "cpu" else "", gpus=report.world, precision=report.precision,
        batch_size=report.batch_size, image_size=report.image_size, images_per_s_1=report.images_per_s_1,
        images_per_s_all=report.images_per_s_all,
        scaling_efficiency=R.scaling_efficiency(report.images_per_s_1, report.images_per_s_all, report.world,
                                                report.device),
        gpu_utilisation=report.gpu_utilisation, cny_per_hour=price,
        cny_per_million_images=R.cny_per_million_images(price, rate), nvme_read_mb_s=report.nvme_read_mb_s,
        cos_to_nvme_mb_s=None if agent is None else R.rate_mb_s(agent.sync_bytes, agent.sync_seconds))


def _state(region: str, force_emulator: bool) -> ObjectStore:
    target = resolve(region, force_emulator)
    return ObjectStore(connect(target), api.state_bucket(None, target))


def store(result: R.BenchResult, region: str, force_emulator: bool) -> None:
    retrying(lambda: _state(region, force_emulator).put_json(R.result_key(result.job_id),
                                                            result.model_dump(mode="json")))


def stored(region: str, force_emulator: bool) -> tuple[list[R.BenchResult], list[str]]:
    """Every stored result of the state bucket, and the keys of documents that do not decode (a newer cvmjob's)."""
    state = _state(region, force_emulator)
    found: list[R.BenchResult] = []
    unreadable: list[str] = []
    if not retrying(state.bucket_exists):  # no state bucket yet: nothing was measured
        return [], []
    infos = retrying(lambda: list(state.iter_objects(R.RESULTS_PREFIX)))
    for info in infos:
        try:
            found.append(R.BenchResult.model_validate(retrying(lambda: state.get_json(info.key))))  # noqa: B023
        except ValidationError:
            unreadable.append(info.key)
    return found, unreadable


def chart(ranked: list[R.BenchResult], path: Path) -> Path:
    """A horizontal bar chart of CNY per million images (the ranking's order, cheapest on top)."""
    need("report", "matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    costed = [r for r in ranked if r.cny_per_million_images is not None]
    figure, axes = plt.subplots(figsize=(8, 1.2 + 0.45 * max(1, len(costed))))
    labels = [f"{r.type} {r.billing}" + (" (CPU)" if r.device == "cpu" else "") for r in costed]
    axes.barh(labels[::-1], [r.cny_per_million_images or 0.0 for r in costed][::-1])
    axes.set_xlabel("CNY per million images (ResNet-50, all GPUs)")
    axes.set_title("cvmjob bench compare" + (f" — {R.CPU_LABEL}" if any(r.device == "cpu" for r in costed) else ""),
                   fontsize=9)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return path
