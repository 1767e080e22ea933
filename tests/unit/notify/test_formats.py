from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from orchestrator.notify import formats
from orchestrator.notify.events import Moved, SweepEnd, for_sweep, job_event
from orchestrator.spec.notify import NotifyTarget
from orchestrator.state.machine import JobState
from tests.records import job_record

DOCUMENTED = json.loads((Path(__file__).parent / "fixtures" / "documented.json").read_text())
EVENT = job_event(job_record(cost_cny=0.1234), Moved(JobState.SUCCEEDED, "trained and imaged"),
                  "succeeded", "job-1/succeeded/1", 0.0)


def _shape(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _shape(item) for key, item in value.items()}
    return type(value).__name__


@pytest.mark.parametrize("platform", ["wecom", "feishu", "dingtalk", "slack"])
def test_each_platforms_message_has_the_shape_its_documentation_shows(platform: str) -> None:
    assert _shape(formats.payload(platform, EVENT)) == _shape(DOCUMENTED[platform]["request"])


@pytest.mark.parametrize("platform", ["wecom", "feishu", "dingtalk", "slack"])
def test_the_answer_each_platform_documents_for_a_message_it_took_is_taken(platform: str) -> None:
    answer = DOCUMENTED[platform]["answer"]
    body = answer if isinstance(answer, str) else json.dumps(answer)
    assert formats.problem(platform, 200, body.encode()) is None


def test_the_json_format_is_cvmjobs_event_itself() -> None:
    assert formats.payload("json", EVENT) is EVENT
    assert EVENT["schema"] == "cvmjob.notification/v1" and EVENT["id"] == "job-1/succeeded/1"
    assert EVENT["job"] == {"id": "job-1", "name": "demo", "state": "SUCCEEDED", "reason": "trained and imaged",
                            "attempt": 1, "exit_code": 0, "cost_cny": 0.1234, "image_id": None}


def test_the_messages_say_the_job_its_state_and_why() -> None:
    text = formats.payload("slack", EVENT)["text"]
    assert text == "cvmjob: job demo (job-1) SUCCEEDED: trained and imaged (cost so far 0.12 CNY)"
    markdown = formats.payload("dingtalk", EVENT)["markdown"]["text"]
    assert "> state: SUCCEEDED" in markdown and "> exit code: 0" in markdown


def test_a_wecom_message_is_cut_to_the_robots_4096_bytes() -> None:
    long = {**EVENT, "job": {**EVENT["job"], "reason": "界" * 3000}}
    content = formats.payload("wecom", long)["markdown"]["content"]
    assert len(content.encode()) <= 4096 and content.endswith("...")


@pytest.mark.parametrize(("platform", "status", "answer", "said"), [
    ("json", 500, b"boom", "HTTP 500: boom"),
    ("slack", 404, b"no_service", "HTTP 404: no_service"),
    ("wecom", 200, b'{"errcode": 93000, "errmsg": "invalid webhook url"}',
     "wecom refused it: code 93000: invalid webhook url"),
    ("dingtalk", 200, b'{"errcode": 310000, "errmsg": "keywords not in content"}',
     "dingtalk refused it: code 310000: keywords not in content"),
    ("feishu", 200, b'{"code": 19021, "msg": "sign match fail or timestamp is not within one hour"}',
     "feishu refused it: code 19021: sign match fail or timestamp is not within one hour"),
    ("wecom", 200, b"<html>", "HTTP 200 with an answer that is not JSON: <html>"),
])
def test_a_refusal_is_said_in_the_receivers_words(platform: str, status: int, answer: bytes, said: str) -> None:
    assert formats.problem(platform, status, answer) == said


SWEEP_EVENT = for_sweep(SweepEnd(study="lr", state="stopped", reason="budget.max_cost: 9.80 of 10.00 CNY spent",
                                 trials=7, cost_cny=9.8, best={"number": 3, "value": 0.41, "params": {"lr": 0.01}}),
                        (NotifyTarget(url="http://127.0.0.1:9/x"),), 0.0)[0].body


@pytest.mark.parametrize("platform", ["wecom", "feishu", "dingtalk", "slack"])
def test_a_sweeps_end_has_each_platforms_shape_too(platform: str) -> None:
    assert _shape(formats.payload(platform, SWEEP_EVENT)) == _shape(DOCUMENTED[platform]["request"])


def test_a_sweeps_end_says_why_it_stopped_its_best_trial_and_its_cost() -> None:
    assert SWEEP_EVENT["event"] == "sweep_stopped" and SWEEP_EVENT["id"] == "sweep:lr/sweep_stopped/7"
    assert formats.payload("slack", SWEEP_EVENT)["text"] == (
        "cvmjob: sweep lr stopped: budget.max_cost: 9.80 of 10.00 CNY spent: 7 trials, 9.80 CNY; best trial 3 (0.41)")
    markdown = formats.payload("wecom", SWEEP_EVENT)["markdown"]["content"]
    assert "> best: trial 3 = 0.41 {'lr': 0.01}" in markdown and "> trials: 7" in markdown
