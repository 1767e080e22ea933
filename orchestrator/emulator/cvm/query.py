"""Request plumbing shared by CVM's action families: the region, ids, filter validation and matching, paging.

Limits from the SDK docstrings: at most 10 filters of at most 5 values (DescribeZoneInstanceConfigInfos: 100),
Offset from 0, Limit default 20, at most 100; several filters AND together, the values of one filter OR.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import TypeVar

from ..api3.dispatch import CallContext
from ..api3.params import Params
from ..catalog import REGIONS
from ..errors import ApiError

T = TypeVar("T")

INSTANCE_ID = re.compile(r"^ins-[a-z0-9]{8}$")
IMAGE_ID = re.compile(r"^img-[a-z0-9]{8}$")
MAX_IDS = 100


def region_of(ctx: CallContext) -> str:
    """Instances, images and timers are regional: each call sees only those of its X-TC-Region."""
    if ctx.region not in REGIONS:
        raise ApiError("InvalidRegion.NotFound", f"The region `{ctx.region}` does not exist; use one of {REGIONS}.")
    return ctx.region


@dataclass(frozen=True)
class Filter:
    name: str
    values: tuple[str, ...]


def parse_filters(
    params: Params, known: Collection[str], *, tag_filters: bool = False, max_values: int = 5
) -> list[Filter]:
    filters = []
    for flt in params.objs("Filters", max_items=10):
        name = flt.req_str("Name")
        if name not in known and not (tag_filters and (name in ("tag-key", "tag-value") or name.startswith("tag:"))):
            raise ApiError("InvalidFilter", f"The filter `{name}` is not supported; use one of {', '.join(known)}.")
        values = flt.str_list("Values")
        if len(values) > max_values:
            raise ApiError(
                "InvalidFilterValue.LimitExceeded", f"The filter `{name}` has more than {max_values} values."
            )
        filters.append(Filter(name, tuple(values)))
    return filters


def matches(
    item: T, filters: Sequence[Filter], values_of: Callable[[T, str], Collection[str]], fuzzy: Collection[str] = ()
) -> bool:
    """``values_of(item, filter name)`` lists what the filter compares; names in ``fuzzy`` match substrings."""
    for flt in filters:
        have = values_of(item, flt.name)
        if flt.name in fuzzy:
            if not any(want in value for want in flt.values for value in have):
                return False
        elif not set(flt.values) & set(have):
            return False
    return True


def _ids(params: Params, name: str) -> list[str]:
    ids = params.str_list(name)
    if len(ids) > MAX_IDS:
        raise ApiError("InvalidParameterValue.LimitExceeded", f"`{name}` holds more than {MAX_IDS} ids.")
    return ids


def check_instance_id(value: str) -> str:
    if not INSTANCE_ID.match(value):
        raise ApiError(
            "InvalidInstanceId.Malformed",
            f"`{value}` is not an instance id like ins-xxxxxxxx (x: a lowercase letter or digit).",
        )
    return value


def check_image_id(value: str) -> str:
    if not IMAGE_ID.match(value):
        raise ApiError("InvalidImageId.Malformed", f"`{value}` is not an image id like img-xxxxxxxx.")
    return value


def instance_ids(params: Params, name: str = "InstanceIds") -> list[str]:
    return [check_instance_id(value) for value in _ids(params, name)]


def required_instance_ids(params: Params) -> list[str]:
    ids = instance_ids(params)
    if not ids:
        raise ApiError("MissingParameter", "The request is missing a required parameter `InstanceIds`.")
    return ids


def image_ids(params: Params) -> list[str]:
    return [check_image_id(value) for value in _ids(params, "ImageIds")]


def page(items: list[T], params: Params) -> list[T]:
    offset = params.int("Offset", 0)
    limit = params.int("Limit", 20)
    assert offset is not None and limit is not None
    if offset < 0 or not 1 <= limit <= 100:
        raise ApiError("InvalidParameterValue.Range", "Offset must be >= 0 and Limit between 1 and 100.")
    return items[offset : offset + limit]
