"""Tags: TagSpecification on create, and the tag filters of Describe* calls."""

from __future__ import annotations

from ..api3.params import Params
from ..errors import ApiError

MAX_TAGS = 50
# Keys under these prefixes are the cloud's own (FailedOperation.TagKeyReserved): qcs:, project and 项目 by the tag
# service's limits (https://www.tencentcloud.com/document/product/651/13354), qcloud and tencent by other products'.
RESERVED_PREFIXES = ("qcs:", "qcloud", "tencent", "project", "项目")


def parse_tag_specification(params: Params, resource_type: str) -> list[dict[str, str]]:
    """The tags for ``resource_type`` ("instance" for RunInstances, "image" for CreateImage)."""
    tags: list[dict[str, str]] = []
    for spec in params.objs("TagSpecification"):
        kind = spec.req_str("ResourceType")
        if kind != resource_type:
            raise ApiError(
                "InvalidParameterValue",
                f"TagSpecification.ResourceType `{kind}` is not supported here; use `{resource_type}`.",
            )
        for tag in spec.objs("Tags"):
            key = tag.req_str("Key")
            value = tag.str("Value", "") or ""
            if not key or len(key) > 127 or len(value) > 255:
                raise ApiError("InvalidParameterValue", f"Tag key `{key}` or its value has an invalid length.")
            if key.lower().startswith(RESERVED_PREFIXES):
                raise ApiError("FailedOperation.TagKeyReserved", f"The tag key `{key}` is reserved by the system.")
            if any(t["Key"] == key for t in tags):
                raise ApiError("InvalidParameterValue.DuplicateTags", f"The tag key `{key}` appears twice.")
            tags.append({"Key": key, "Value": value})
    if len(tags) > MAX_TAGS:
        raise ApiError("InvalidParameterValue.TagQuotaLimitExceeded", f"At most {MAX_TAGS} tags per resource.")
    return tags


def tag_filter_values(tags: list[dict[str, str]], name: str) -> list[str] | None:
    """What a tag filter compares (tag-key, tag-value, tag:<key>); None when ``name`` is no tag filter."""
    if name == "tag-key":
        return [t["Key"] for t in tags]
    if name == "tag-value":
        return [t["Value"] for t in tags]
    if name.startswith("tag:"):
        return [t["Value"] for t in tags if t["Key"] == name[4:]]
    return None
