from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from orchestrator.spec import SpecError, load_spec

# Every field set, as in docs/spec.md.
FULL_SPEC = """\
name: quickstart
region: ap-guangzhou
zones: [ap-guangzhou-3, ap-guangzhou-4]
instance:
  type: GN7.2XLARGE32
  alternatives: [GN7.5XLARGE80]
billing:
  mode: spot
  spot_max_price: 2.5
image:
  id: img-487zeit5
disks:
  system: {type: CLOUD_PREMIUM, size_gib: 100}
  data: [{type: CLOUD_SSD, size_gib: 500}]
workdir: .
setup: ["pip install -r requirements.txt"]
data:
  - source: cos://datasets-1250000000/mnist
    target: mnist
train:
  command: python train.py --epochs 3
  nproc_per_node: auto
  cpu_nproc: 2
  nnodes: 2
  elastic_min_nodes: 1
  max_restarts: 1
  env: {NCCL_DEBUG: WARN, EPOCHS: 3}
  hang_timeout: 30m
checkpoints:
  dir: checkpoints
  upload_to: cos://bucket-1250000000/prefix
  keep_last: 3
  interval_steps: 100
outputs:
  dir: outputs
  upload_to: null
snapshot:
  enabled: true
  name: "{name}-{date}-{job_id}"
  keep_last: 3
teardown:
  on_success: destroy
  on_failure: keep
  keep_for: 30m
limits:
  max_runtime: 1h30m
  max_cost: 50
tags: {team: ml, 小组: 视觉}
storage:
  bucket: cvmjob-1250000000
credentials: sts
policies:
  recovery: default
  pool: default
"""

MINIMAL_SPEC = """\
name: tiny
region: ap-guangzhou
instance: {type: S5.MEDIUM4}
train: {command: python train.py}
"""


@pytest.fixture
def write_spec(tmp_path: Path) -> Callable[[str], Path]:
    def write(text: str) -> Path:
        path = tmp_path / "job.yaml"
        path.write_text(text, encoding="utf-8")
        return path

    return write


@pytest.fixture
def problems(write_spec: Callable[[str], Path]) -> Callable[..., list[str]]:
    """The lines of the SpecError that loading FULL_SPEC (or ``text``) with ``overrides`` raises."""

    def lines(*overrides: str, text: str = FULL_SPEC) -> list[str]:
        path = write_spec(text)
        return error_lines(path, overrides)

    return lines


def error_lines(path: Path, overrides: Sequence[str] = ()) -> list[str]:
    with pytest.raises(SpecError) as caught:
        load_spec(path, overrides)
    return str(caught.value).splitlines()
