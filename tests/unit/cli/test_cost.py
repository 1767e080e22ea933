"""`cvmjob cost` over a store populated directly (no cloud): the table per job or per group, --since, --by and
--output json, and what it says of where each number comes from."""

from __future__ import annotations

import json
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import optuna
import pytest
from typer.testing import CliRunner, Result

from orchestrator.cli.cost import since_of
from orchestrator.cli.main import app
from orchestrator.cli.options import Abort
from orchestrator.providers.tencent.vocabulary import ChargeType
from orchestrator.state.machine import JobState, NodeState
from orchestrator.state.store import NodeRecord, Store
from orchestrator.sweep import study as S
from tests.records import new_job, spec

NOW = time.time()  # a fixed instant for the pure --since arithmetic
DAY = 86_400.0


@pytest.fixture
def db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A store with an ended job of ten days ago (2 CNY, 0.50 of it not training), tagged, and one running now.
    Its clock is read here, not at import: the command's is the real one (the running job's estimate is its price
    so far), and a test run long after its collection saw the running job cost more than the ended one."""
    now = time.time()
    node = NodeRecord("job-old", 1, 0, "tok", "ap-guangzhou-3", "GN7.2XLARGE32", ChargeType.SPOT, 2.0, "ins-1",
                      NodeState.GONE, running_at=now - 10 * DAY, ended_at=now - 10 * DAY + 3600, cost_cny=2.0,
                      cost_source="bill", training_seconds=2700.0)
    path = tmp_path / "state.db"
    monkeypatch.setenv("CVMJOB_DB", str(path))
    store = Store(path)
    for job_id, name, created, tags in (("job-old", "bert", now - 10 * DAY, {"team": "nlp"}),
                                        ("job-new", "resnet", now - 3600, {})):
        store.create_job(new_job(job_id, name, job_spec=spec(name, tags=tags), deadline=now + DAY), now=created)
    token = store.acquire("job-old", "test", ttl=60, now=now)
    store.put_node(token, node)
    for before, state in ((JobState.PENDING, JobState.STAGING), (JobState.STAGING, JobState.TEARING_DOWN),
                          (JobState.TEARING_DOWN, JobState.SUCCEEDED)):
        store.transition("job-old", token, before, state, "", now - 9 * DAY)
    store.update("job-old", token, now - 9 * DAY, cost_cny=2.0)
    token = store.acquire("job-new", "test", ttl=60, now=now)
    store.put_node(token, replace(node, job_id="job-new", instance_id="ins-2", running_at=now - 1800, ended_at=None,
                                  cost_cny=None, cost_source=None, training_seconds=None))
    store.close()
    return path


def cost(*args: str) -> Result:
    return CliRunner().invoke(app, ["cost", *args])


def as_json(*args: str) -> Any:
    result = cost(*args, "--output", "json")
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_each_job_with_its_bill_its_share_not_training_and_where_they_come_from(db: Path) -> None:
    report = as_json()
    new, old = report["jobs"]  # newest first
    assert (old["job_id"], old["state"], old["cost_cny"], old["source"]) == ("job-old", "SUCCEEDED", 2.0, "bill")
    assert (old["not_training_seconds"], old["not_training_cny"]) == (900.0, 0.5)
    assert (old["instance_types"], old["billing"], old["tags"]) == (["GN7.2XLARGE32"], ["spot"], {"team": "nlp"})
    assert new["source"] == "estimate so far" and new["not_training_cny"] is None and new["cost_cny"] > 0
    assert report["total"]["jobs"] == 2 and report["total"]["unknown"] == 1
    assert "not training" in report["where_from"]

    table = cost().output
    for shown in ("cost per job", "job-old", "bert", "GN7.2XLARGE32", "spot", "¥2.00", "¥0.50", "25%", "bill",
                  "estimate so far", "total: 2 job(s)", "(1 job(s) not known)", "boot, setup, preflight, sync"):
        assert shown in table, shown


def test_since_a_duration_or_a_date_leaves_the_older_jobs_out(db: Path) -> None:
    assert [j["job_id"] for j in as_json("--since", "7d")["jobs"]] == ["job-new"]
    assert [j["job_id"] for j in as_json("--since", "2000-01-01")["jobs"]] == ["job-new", "job-old"]
    assert since_of("24h", NOW) == NOW - DAY and since_of("2025-06-01T00:00:00+00:00", NOW) == 1_748_736_000
    with pytest.raises(Abort, match="--since 'last week': give a duration back from now"):
        since_of("last week", NOW)


def test_grouped_by_name_tag_or_sweep(db: Path) -> None:
    assert [(g["key"], g["jobs"], g["not_training_cny"]) for g in as_json("--by", "name")["groups"]] == [
        ("bert", 1, 0.5), ("resnet", 1, 0.0)]
    assert [g["key"] for g in as_json("--by", "tag")["groups"]] == ["team=nlp", "-"]
    trial = optuna.create_study(study_name="lr", storage=S.storage(str(db))).ask()
    trial.set_user_attr(S.JOBS_ATTR, ["job-new"])
    by_sweep = as_json("--by", "sweep")
    assert [(g["key"], g["jobs"]) for g in by_sweep["groups"]] == [("-", 1), ("lr", 1)]
    assert {j["job_id"]: j["sweep"] for j in by_sweep["jobs"]} == {"job-new": "lr", "job-old": None}
    assert "cost per tag" in cost("--by", "tag").output


def test_a_grouping_it_does_not_know_is_refused(db: Path) -> None:
    result = cost("--by", "team")
    assert isinstance(result.exception, Abort) and "--by must be one of name, tag, sweep" in str(result.exception)
