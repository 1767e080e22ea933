"""Each receiver's message, rendered from cvmjob's json event, and how each says it took one.

The shapes are the platforms' own (the fixtures in tests/unit/notify/fixtures/ are their documentation's examples):
- WeCom group robot: ``{"msgtype": "markdown", "markdown": {"content": ...}}`` (at most 4,096 bytes), answered
  ``{"errcode": 0, "errmsg": "ok"}``; an error is a non-zero errcode with HTTP 200
  (developer.work.weixin.qq.com/document/path/91770).
- Feishu custom bot: ``{"msg_type": "text", "content": {"text": ...}}``, answered ``{"code": 0, ...}``
  (open.feishu.cn/document/client-docs/bot-v3/add-custom-bot).
- DingTalk custom robot: ``{"msgtype": "markdown", "markdown": {"title": ..., "text": ...}}``, answered
  ``{"errcode": 0, "errmsg": "ok"}`` (open.dingtalk.com/document/robots/custom-robot-access).
- Slack incoming webhook: ``{"text": ...}``, answered HTTP 200 ``ok`` (api.slack.com/messaging/webhooks).
"""

from __future__ import annotations

import json
from typing import Any

WECOM_MAX_BYTES = 4096


def payload(format: str, event: dict[str, Any]) -> dict[str, Any]:
    """What is posted to a receiver of ``format`` for ``event`` (events.job_event's shape)."""
    if format == "json":
        return event
    text = str(event["text"])
    if format == "wecom":
        return {"msgtype": "markdown", "markdown": {"content": _fit(_markdown(event), WECOM_MAX_BYTES)}}
    if format == "feishu":
        return {"msg_type": "text", "content": {"text": text}}
    if format == "dingtalk":
        return {"msgtype": "markdown", "markdown": {"title": _title(event), "text": _markdown(event)}}
    if format == "slack":
        return {"text": text}
    raise ValueError(f"no notification format {format!r}")


def problem(format: str, status: int, answer: bytes) -> str | None:
    """None when the receiver took the message; else why not, in a line."""
    said = answer.decode("utf-8", "replace").strip()
    if not 200 <= status < 300:
        return f"HTTP {status}: {said[:200]}"
    if format in ("wecom", "dingtalk", "feishu"):
        try:
            reply = json.loads(said)
        except ValueError:
            return f"HTTP {status} with an answer that is not JSON: {said[:200]}"
        code = reply.get("code", reply.get("StatusCode")) if format == "feishu" else reply.get("errcode")
        if code != 0:
            message = reply.get("msg") if format == "feishu" else reply.get("errmsg")
            return f"{format} refused it: code {code}: {message}"
    return None


def _title(event: dict[str, Any]) -> str:
    subject = event["job"]["name"] if "job" in event else f"sweep {event['sweep']['study']}"
    return f"cvmjob: {subject} {event['event']}"


def _markdown(event: dict[str, Any]) -> str:
    lines = [f"**{_title(event)}**"]
    if "job" in event:
        job = event["job"]
        lines += [f"> job: {job['id']} (attempt {job['attempt']})", f"> state: {job['state']}",
                  f"> reason: {job['reason']}", f"> cost: {job['cost_cny']:.2f} CNY"]
        if job.get("exit_code") is not None:
            lines.append(f"> exit code: {job['exit_code']}")
    else:
        sweep = event["sweep"]
        lines += [f"> state: {sweep['state']}" + (f" ({sweep['reason']})" if sweep["reason"] else ""),
                  f"> trials: {sweep['trials']}", f"> cost: {sweep['cost_cny']:.2f} CNY"]
        if (best := sweep.get("best")) is not None:
            lines.append(f"> best: trial {best['number']} = {best['value']} {best['params']}")
    return "\n".join(lines)


def _fit(text: str, limit: int) -> str:
    data = text.encode()
    return text if len(data) <= limit else data[: limit - 3].decode("utf-8", "ignore") + "..."
