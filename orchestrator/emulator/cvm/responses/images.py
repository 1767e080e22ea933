"""Custom image actions: CreateImage, DescribeImages (public images too), DeleteImages."""

from __future__ import annotations

from typing import Any

from ...api3.dispatch import CallContext
from ...api3.params import Params
from ...catalog import INSTANCE_TYPES_BY_NAME
from ...errors import ApiError
from .. import query, views
from ..images import PUBLIC_BY_ID
from ..models import Cvm
from ..tags import parse_tag_specification, tag_filter_values

IMAGE_FILTERS = ("image-id", "image-type", "image-name", "platform")
_IMAGE_FIELDS = {"image-id": "ImageId", "image-type": "ImageType", "image-name": "ImageName", "platform": "Platform"}


def image_values(image: dict[str, Any], name: str) -> list[str]:
    tags = tag_filter_values(image["Tags"], name)
    if tags is not None:
        return tags
    return [image[_IMAGE_FIELDS[name]]]


def create_image(cvm: Cvm, ctx: CallContext, params: Params) -> dict[str, Any]:
    region = query.region_of(ctx)
    name = params.req_str("ImageName")
    if "SnapshotIds" in params:
        raise ApiError("InvalidParameter.SnapshotNotFound", "There are no snapshots; image an instance instead.")
    instance_id = params.str("InstanceId")
    if instance_id is None:
        raise ApiError("InvalidParameter.SpecifyOneParameter", "CreateImage needs InstanceId or SnapshotIds.")
    query.check_instance_id(instance_id)
    description = params.str("ImageDescription", "") or ""
    if len(description) > 256:
        raise ApiError("InvalidParameter.ValueTooLarge", "ImageDescription is longer than 256 characters.")
    if (params.str("ForcePoweroff", "false") or "false") not in ("true", "false"):
        raise ApiError("InvalidParameterValue", "ForcePoweroff is the string `true` or `false`.")
    if params.str_list("DataDiskIds"):
        # Data disks hold nothing here: only the system disk is captured.
        raise ApiError("InvalidParameter.LocalDataDiskNotSupport", "Only the system disk is imaged.")
    tags = parse_tag_specification(params, "image")
    image = cvm.create_image(region, instance_id, name, description, tags, ctx.request_id, params.bool("DryRun"))
    return {} if image is None else {"ImageId": image.image_id}


def describe_images(cvm: Cvm, ctx: CallContext, params: Params) -> dict[str, Any]:
    region = query.region_of(ctx)
    ids = query.image_ids(params)
    filters = query.parse_filters(params, IMAGE_FILTERS, tag_filters=True)
    if ids and filters:
        raise ApiError(
            "InvalidParameter.InvalidParameterCoexistImageIdsFilters", "ImageIds and Filters cannot be combined."
        )
    instance_type = params.str("InstanceType")
    if instance_type is not None and instance_type not in INSTANCE_TYPES_BY_NAME:
        raise ApiError(
            "InvalidParameterValue.InstanceTypeNotFound", f"The instance type `{instance_type}` does not exist."
        )
    images = [views.public_image(i) for i in PUBLIC_BY_ID]
    images += [views.private_image(i, cvm.iam.uin) for i in cvm.images.in_region(region)]
    if ids:
        images = [i for i in images if i["ImageId"] in ids]
    images = [i for i in images if query.matches(i, filters, image_values, fuzzy=("image-name", "platform"))]
    return {"TotalCount": len(images), "ImageSet": query.page(images, params)}


def delete_images(cvm: Cvm, ctx: CallContext, params: Params) -> dict[str, Any]:
    region = query.region_of(ctx)
    ids = query.image_ids(params)
    if not ids:
        raise ApiError("MissingParameter", "The request is missing a required parameter `ImageIds`.")
    cvm.images.delete(region, ids, dry_run=params.bool("DryRun"))
    return {}
