"""``train.retry``: exit codes or a hang that relaunch on a fresh instance; each problem one line at its field."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from orchestrator.plan.configure import settings_for
from orchestrator.plan.settings import RetryRules
from orchestrator.policy.loader import load_job
from orchestrator.spec import SpecError, load_spec
from tests.unit.spec.conftest import MINIMAL_SPEC

TRAIN = "train: {command: python train.py}"


def _spec(write_spec: Callable[[str], Path], train: str) -> Path:
    return write_spec(MINIMAL_SPEC.replace(TRAIN, f"train: {{command: python train.py, {train}}}"))


def test_retry_reaches_the_settings_decide_reads(write_spec: Callable[[str], Path]) -> None:
    spec, policies = load_job(_spec(write_spec, "hang_timeout: 10m, retry: {on_exit_codes: [134, 1], on_hang: true}"))
    rules = settings_for(spec, policies.recovery, policies.pool).retry
    assert rules == RetryRules(exit_codes=(134, 1), on_hang=True, max=2, log_causes=("nccl_timeout", "gpu_xid"))
    spec, policies = load_job(_spec(write_spec, "retry: {on_exit_codes: [3], on_log: []}"))
    assert settings_for(spec, policies.recovery, policies.pool).retry.log_causes == ()
    plain, policies = load_job(write_spec(MINIMAL_SPEC))
    assert settings_for(plain, policies.recovery, policies.pool).retry == RetryRules()


@pytest.mark.parametrize(("retry", "said"), [
    ("retry: {on_log: [], max: 3}",
     "train.retry.on_exit_codes: nothing retries: list exit codes or log causes (on_log), or set on_hang: true"),
    ("retry: {on_log: [gpu_xid, gpu_xid]}", "train.retry.on_log: a cause is listed twice"),
    ("retry: {on_log: [nccl]}", "train.retry.on_log.0"),
    ("retry: {on_exit_codes: [3, 3]}", "train.retry.on_exit_codes: an exit code is listed twice"),
    ("retry: {on_exit_codes: [0]}", "train.retry.on_exit_codes.0: 0 is out of range"),
    ("retry: {on_exit_codes: [3], max: 0}", "train.retry.max: 0 is out of range"),
    ("retry: {on_hang: true}", "train.retry.on_hang: a hang is only seen with train.hang_timeout set"),
    ("retry: {on_exit_code: [3]}", "did you mean 'on_exit_codes'"),
])
def test_a_bad_retry_is_one_line_at_its_field(write_spec: Callable[[str], Path], retry: str, said: str) -> None:
    with pytest.raises(SpecError) as caught:
        load_spec(_spec(write_spec, retry))
    assert said in str(caught.value) and len(caught.value.problems) == 1, str(caught.value)
