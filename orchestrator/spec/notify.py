"""``notify:``: where a job's (or a sweep's) events are posted, in which shape, and which events.

A webhook URL of WeCom, Feishu, DingTalk or Slack carries its token (a query's ``key``/``access_token``, a path's
hook id), so those are named by ``url_env``: the variable that holds the URL in every controller's environment.
Only the name reaches the store; the URL is read when a notification is sent."""

from __future__ import annotations

from typing import Annotated, Literal
from urllib.parse import urlsplit

from pydantic import AfterValidator, Field, model_validator

from orchestrator.spec.base import SpecModel, field_problem
from orchestrator.spec.workload import EnvName

# What a notification is about (docs/notifications.md lists each one's fields): a job that ended SUCCEEDED, in a
# FAILED_* state or CANCELLED; a spot instance of an attempt reclaimed (the job recovers); limits.max_cost reached
# (also a ``failed``); a succeeded job that missed a `cvmjob run --gate` (its run exits 5); a sweep that has all its
# trials, or stopped before (its budget, its brakes, a cancel).
NotifyEvent = Literal["succeeded", "failed", "cancelled", "reclaimed", "budget_reached", "gate_missed",
                      "sweep_finished", "sweep_stopped"]
JOB_EVENTS: tuple[NotifyEvent, ...] = ("succeeded", "failed", "cancelled", "reclaimed", "budget_reached",
                                       "gate_missed")
Format = Literal["json", "wecom", "feishu", "dingtalk", "slack"]
# The ends of what the target is attached to: a job's (and a CI run's verdict on it), a sweep's.
DEFAULT_EVENTS: tuple[NotifyEvent, ...] = ("succeeded", "failed", "cancelled", "gate_missed", "sweep_finished",
                                           "sweep_stopped")


def _http_url(url: str) -> str:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{url!r} is not an http:// or https:// URL")
    if parts.query or parts.username or parts.password:
        raise ValueError("a URL with a query or a login may hold a token, and the spec is kept in plain text. put "
                         "the URL in an environment variable and name it in url_env")
    return url


HttpUrl = Annotated[str, AfterValidator(_http_url)]


class NotifyTarget(SpecModel):
    """One receiver of notifications."""

    url: HttpUrl | None = None
    """The receiver's URL, written in the spec (kept in plain text: only a URL without a token, e.g. your own
    receiver's). Exactly one of url and url_env."""
    url_env: EnvName | None = Field(None, examples=["WECOM_WEBHOOK"])
    """The environment variable that holds the URL, read by the controller when it sends (every controller that
    may drive the job needs it: `cvmjob run`, `resume`, `controller`). Exactly one of url and url_env."""
    format: Format = "json"
    """The body's shape: json (cvmjob's own versioned event, docs/notifications.md), or the message of a wecom,
    feishu, dingtalk or slack group robot (incoming webhook)."""
    on: tuple[NotifyEvent, ...] = DEFAULT_EVENTS
    """The events to send. Default: the ends (succeeded, failed, cancelled, gate_missed; a sweep's sweep_finished
    and sweep_stopped)."""

    @model_validator(mode="after")
    def _one_url(self) -> NotifyTarget:
        if (self.url is None) == (self.url_env is None):
            raise field_problem("url", "give exactly one of url and url_env")
        if self.url is not None and self.format != "json":
            raise field_problem("url", f"a {self.format} webhook's URL holds its token. put it in an environment "
                                       "variable and name it in url_env")
        if not self.on:
            raise field_problem("on", "must not be empty. name the events to send, e.g. [failed]")
        if len(set(self.on)) != len(self.on):
            raise field_problem("on", "an event is listed twice")
        return self

    def describe(self) -> str:
        """The target for people: never the URL of a url_env (it may hold a token)."""
        where = f"${self.url_env}" if self.url_env is not None else str(self.url)
        return f"{self.format} to {where}"
