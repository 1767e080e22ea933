"""Scheduled termination: Import/Describe/DeleteInstancesActionTimer."""

from __future__ import annotations

from typing import Any

from ...api3.dispatch import CallContext
from ...api3.params import Params
from ...errors import ApiError
from .. import query, views
from ..launch import parse_action_time
from ..models import Cvm
from ..records import ActionTimer
from ..times import parse_cst

TIMER_STATUSES = ("UNDO", "DOING", "DONE")


def import_instances_action_timer(cvm: Cvm, ctx: CallContext, params: Params) -> dict[str, Any]:
    region = query.region_of(ctx)
    ids = query.required_instance_ids(params)
    timer = params.obj("ActionTimer", required=True)
    assert timer is not None
    return {"ActionTimerIds": cvm.import_timers(region, ids, parse_action_time(timer, cvm.clock.now()))}


def describe_instances_action_timer(cvm: Cvm, ctx: CallContext, params: Params) -> dict[str, Any]:
    region = query.region_of(ctx)
    timer_ids = params.str_list("ActionTimerIds")
    instance_ids = query.instance_ids(params)
    action = params.str("TimerAction")
    statuses = params.str_list("StatusList")
    if any(s not in TIMER_STATUSES for s in statuses):
        raise ApiError("InvalidParameterValue", f"StatusList holds only {', '.join(TIMER_STATUSES)}.")
    bounds = []
    for name in ("StartActionTime", "EndActionTime"):
        text = params.str(name)
        bound = parse_cst(text) if text is not None else None
        if text is not None and bound is None:
            raise ApiError("InvalidParameterValue.InvalidTimeFormat", f"{name} is `YYYY-MM-DD hh:mm:ss`.")
        bounds.append(bound)
    start, end = bounds

    def wanted(timer: ActionTimer) -> bool:
        return (
            timer.region == region
            and (not timer_ids or timer.timer_id in timer_ids)
            and (not instance_ids or timer.instance_id in instance_ids)
            and action in (None, "TerminateInstances")
            and (not statuses or timer.status in statuses)
            and (start is None or timer.action_time >= start)
            and (end is None or timer.action_time <= end)
        )

    return {"ActionTimers": [views.action_timer(t) for t in cvm.timers.values() if wanted(t)]}


def delete_instances_action_timer(cvm: Cvm, ctx: CallContext, params: Params) -> dict[str, Any]:
    region = query.region_of(ctx)
    timer_ids = params.str_list("ActionTimerIds", required=True)
    cvm.delete_timers(region, timer_ids)
    return {}
