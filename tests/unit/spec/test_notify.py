"""``notify:`` in the spec and in $CVMJOB_HOME/config.yaml: a receiver's URL in the spec only when it holds no
token, the robots' by the name of a variable; each problem one line at its field."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from orchestrator.spec import SpecError, load_spec
from orchestrator.spec.userconfig import load_user_config, unset_urls, with_user_defaults
from tests.unit.spec.conftest import MINIMAL_SPEC


def test_targets_take_a_url_or_a_variables_name_and_the_events_they_want(write_spec: Callable[[str], Path]) -> None:
    targets = ("notify:\n  - {url: 'http://127.0.0.1:8080/hook'}\n"
               "  - url_env: WECOM_HOOK\n    format: wecom\n    on: [failed, reclaimed]\n")  # `on:`, a YAML 1.1 boolean
    spec = load_spec(write_spec(MINIMAL_SPEC + targets))
    assert spec.notify is not None
    mine, robot = spec.notify
    assert (mine.format, mine.on) == ("json", ("succeeded", "failed", "cancelled", "gate_missed", "sweep_finished",
                                              "sweep_stopped"))
    assert (robot.url_env, robot.on) == ("WECOM_HOOK", ("failed", "reclaimed"))
    assert robot.describe() == "wecom to $WECOM_HOOK"  # never the URL the variable holds
    assert load_spec(write_spec(MINIMAL_SPEC)).notify is None  # unset: the config's default applies


@pytest.mark.parametrize(("target", "said"), [
    ("{url_env: HOOK, url: 'http://127.0.0.1/x'}", "notify.0.url: give exactly one of url and url_env"),
    ("{format: json}", "notify.0.url: give exactly one of url and url_env"),
    ("{url: 'https://qyapi.weixin.qq.com/cgi-bin/webhook/send?key=abc'}",
     "a URL with a query or a login may hold a token"),
    ("{url: 'https://hooks.slack.com/services/T0/B0/x', format: slack}",
     "notify.0.url: a slack webhook's URL holds its token. put it in an environment variable and name it in url_env"),
    ("{url: 'ftp://127.0.0.1/x'}", "'ftp://127.0.0.1/x' is not an http:// or https:// URL"),
    ("{url_env: HOOK, format: teams}", "notify.0.format:"),
    ("{url_env: HOOK, on: [succeded]}", "notify.0.on.0: 'succeded' is not one of 'succeeded', 'failed'"),
    ("{url_env: HOOK, on: []}", "notify.0.on: must not be empty"),
    ("{url_env: HOOK, on: [failed, failed]}", "notify.0.on: an event is listed twice"),
    ("{url_env: hook}", "notify.0.url_env: 'hook' is not a valid variable name"),
])
def test_a_bad_target_is_one_line_at_its_field(write_spec: Callable[[str], Path], target: str, said: str) -> None:
    with pytest.raises(SpecError) as caught:
        load_spec(write_spec(MINIMAL_SPEC + f"notify: [{target}]\n"))
    [problem] = caught.value.problems
    assert said in str(problem) and "\n" not in str(problem)


def test_a_misspelt_event_is_offered_the_nearest(write_spec: Callable[[str], Path]) -> None:
    with pytest.raises(SpecError) as caught:
        load_spec(write_spec(MINIMAL_SPEC + "notify: [{url_env: HOOK, on: [succeded]}]\n"))
    assert "succeeded" in str(caught.value)


def test_the_config_files_notify_is_the_default_of_a_spec_without_one(tmp_path: Path,
                                                                     write_spec: Callable[[str], Path]) -> None:
    assert load_user_config(tmp_path).notify == ()  # no file: no default
    (tmp_path / "config.yaml").write_text("notify:\n  - url_env: TEAM_HOOK\n    format: feishu\n")
    config = load_user_config(tmp_path)
    unset = load_spec(write_spec(MINIMAL_SPEC))
    assert with_user_defaults(unset, config).notify == config.notify
    none = load_spec(write_spec(MINIMAL_SPEC + "notify: []\n"))
    assert with_user_defaults(none, config).notify == ()  # the spec's own "none" wins
    [unset] = unset_urls(config.notify, {})
    assert unset.startswith("notify: $TEAM_HOOK is not set (or empty) in this environment")
    assert unset_urls(config.notify, {"TEAM_HOOK": "https://open.feishu.cn/x"}) == []


def test_a_bad_config_file_is_one_error_naming_the_file(tmp_path: Path) -> None:
    (tmp_path / "config.yaml").write_text("notfy: []\n")
    with pytest.raises(SpecError) as caught:
        load_user_config(tmp_path)
    assert str(tmp_path / "config.yaml") in str(caught.value) and "notify" in str(caught.value)
