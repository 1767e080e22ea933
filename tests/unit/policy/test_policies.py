from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.policy.loader import (
    BUILTIN_DIR,
    PolicyNotFound,
    load_job,
    load_job_policies,
    load_policy,
    policy_names,
    policy_search_dirs,
)
from orchestrator.policy.models import PoolPolicy, RecoveryPolicy
from orchestrator.spec import SpecError, load_spec

MINIMAL_SPEC = "name: tiny\nregion: ap-guangzhou\ninstance: {type: S5.MEDIUM4}\ntrain: {command: python train.py}\n"
CUSTOM_RECOVERY = """\
max_preemptions: 1
max_launch_failures: 2
same_zone_retries: 0
next_zone: false
alternative_types: false
give_up_after: 10m
"""


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_builtins_are_the_documented_ones() -> None:
    assert policy_names("recovery", [BUILTIN_DIR]) == ["aggressive-spot", "default", "on-demand-only"]
    assert policy_names("pool", [BUILTIN_DIR]) == ["default"]


@pytest.mark.parametrize("name", ["default", "aggressive-spot", "on-demand-only"])
def test_every_builtin_recovery_policy_loads(name: str) -> None:
    policy = load_policy("recovery", name, [BUILTIN_DIR])
    assert isinstance(policy, RecoveryPolicy) and policy.description


def test_builtin_policies_mean_what_their_names_say() -> None:
    default = load_policy("recovery", "default", [BUILTIN_DIR])
    backoff, detection = default.backoff, default.reclaim_detection
    assert (backoff.initial, backoff.max, detection.heartbeat_stale_after) == (5, 60, 60)
    assert load_policy("recovery", "aggressive-spot", [BUILTIN_DIR]).fallback_to_on_demand is None
    on_demand = load_policy("recovery", "on-demand-only", [BUILTIN_DIR]).fallback_to_on_demand
    assert on_demand is not None and on_demand.after_preemptions == 1 and on_demand.after_minutes == 0
    pool = load_policy("pool", "default", [BUILTIN_DIR])
    assert isinstance(pool, PoolPolicy) and (pool.when_busy, pool.wait_timeout) == ("wait", 1800)


def test_policies_next_to_the_spec_come_first(tmp_path: Path) -> None:
    _write(tmp_path / "policies" / "recovery" / "default.yaml", CUSTOM_RECOVERY)
    policy = load_policy("recovery", "default", policy_search_dirs(tmp_path))
    assert policy.max_preemptions == 1 and policy.give_up_after == 600


def test_policy_by_path_is_relative_to_the_spec(tmp_path: Path) -> None:
    _write(tmp_path / "mine" / "quick.yaml", CUSTOM_RECOVERY)
    policy = load_policy("recovery", "mine/quick.yaml", policy_search_dirs(tmp_path), relative_to=tmp_path)
    assert policy.same_zone_retries == 0


def test_spec_loads_its_policies(tmp_path: Path) -> None:
    _write(tmp_path / "policies" / "recovery" / "patient.yaml", CUSTOM_RECOVERY)
    spec_path = _write(tmp_path / "job.yaml", MINIMAL_SPEC + "policies: {recovery: patient}\n")

    policies = load_job_policies(load_spec(spec_path), spec_path)

    assert policies.recovery.max_launch_failures == 2
    assert policies.pool == load_policy("pool", "default", [BUILTIN_DIR])


def test_unknown_name_suggests_the_nearest(tmp_path: Path) -> None:
    with pytest.raises(PolicyNotFound) as caught:
        load_policy("recovery", "agressive-spot", policy_search_dirs(tmp_path))
    assert str(caught.value) == (
        f"agressive-spot: no recovery policy named 'agressive-spot'. did you mean 'aggressive-spot'? "
        f"(looked in {tmp_path}/policies/recovery, {BUILTIN_DIR}/recovery)"
    )


def test_unknown_policy_in_a_spec_points_at_the_spec_field(tmp_path: Path) -> None:
    spec_path = _write(tmp_path / "job.yaml", MINIMAL_SPEC + "policies: {recovery: defualt, pool: nope.yaml}\n")
    with pytest.raises(SpecError) as caught:
        load_job(spec_path)
    lines = str(caught.value).splitlines()
    assert lines[0].startswith(f"{spec_path}: policies.recovery: no recovery policy named 'defualt'. "
                               "did you mean 'default'?")
    assert lines[1] == f"{spec_path}: policies.pool: no pool policy file '{tmp_path}/nope.yaml'"


def test_problems_in_a_policy_file_name_that_file_and_field(tmp_path: Path) -> None:
    policy_path = _write(tmp_path / "policies" / "recovery" / "broken.yaml", CUSTOM_RECOVERY.replace(
        "next_zone: false", "next_zones: false") + "backoff: {initial: 2m, max: 1m, jitter: 2}\n")
    spec_path = _write(tmp_path / "job.yaml", MINIMAL_SPEC + "policies: {recovery: broken}\n")
    with pytest.raises(SpecError) as caught:
        load_job(spec_path)
    assert str(caught.value).splitlines() == [
        f"{policy_path}: backoff.jitter: 2 is out of range. allowed: 0..1",
        f"{policy_path}: next_zone: required field is missing",
        f"{policy_path}: next_zones: unknown field. did you mean 'next_zone'?",
    ]


@pytest.mark.parametrize(("text", "expected"), [
    ("backoff: {initial: 2m, max: 1m}\n", "backoff.max: 60s is less than initial (120s)"),
    ("fallback_to_on_demand: {}\n", "fallback_to_on_demand: set after_preemptions, after_minutes or both; to never "
                                    "fall back, write fallback_to_on_demand: null"),
    ("give_up_after: 30s\n", "give_up_after: 30s is out of range. allowed 1m..30d"),
    ("max_preemptions: -1\n", "max_preemptions: -1 is out of range. allowed: 0..1000"),
])
def test_recovery_policy_checks(tmp_path: Path, text: str, expected: str) -> None:
    document = {line.partition(":")[0]: line for line in CUSTOM_RECOVERY.splitlines()}
    document[text.partition(":")[0]] = text.strip()
    path = _write(tmp_path / "recovery" / "p.yaml", "\n".join(document.values()) + "\n")
    with pytest.raises(SpecError) as caught:
        load_policy("recovery", "p", [tmp_path])
    assert str(caught.value) == f"{path}: {expected}"


@pytest.mark.parametrize(("text", "expected"), [
    ("when_busy: queue\n", "when_busy: 'queue' is not one of 'wait', 'on-demand', 'fail'"),
    ("when_busy: wait\nreset: reimage\n",
     "reset: unknown field. valid fields here: description, when_busy, wait_timeout"),
    ("", "the file is empty. a pool policy needs at least: when_busy"),
])
def test_pool_policy_checks(tmp_path: Path, text: str, expected: str) -> None:
    path = _write(tmp_path / "pool" / "p.yaml", text)
    with pytest.raises(SpecError) as caught:
        load_policy("pool", "p", [tmp_path])
    assert str(caught.value).startswith(f"{path}: {expected}")



def test_the_spec_alone_loads_without_its_policies(tmp_path: Path) -> None:
    """spec/ knows nothing of policies: a name that is nowhere is load_job's problem, not load_spec's."""
    spec_path = _write(tmp_path / "job.yaml", MINIMAL_SPEC + "policies: {recovery: defualt}\n")

    assert load_spec(spec_path).policies.recovery == "defualt"
    with pytest.raises(SpecError, match="no recovery policy named 'defualt'"):
        load_job(spec_path)
