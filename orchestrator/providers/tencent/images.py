"""Custom images: create from an instance, wait, list by tag, delete (retention)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ._sdk import TencentSdk

PAGE = 100


@dataclass(frozen=True)
class ImageView:
    image_id: str
    name: str
    state: str  # CREATING | NORMAL | CREATEFAILED | ...
    image_type: str
    created_at: str
    tags: dict[str, str]

    @classmethod
    def from_api(cls, item: dict[str, Any]) -> ImageView:
        return cls(
            image_id=item["ImageId"],
            name=item.get("ImageName", ""),
            state=item.get("ImageState", "UNKNOWN"),
            image_type=item.get("ImageType", ""),
            created_at=item.get("CreatedTime") or "",
            tags={t["Key"]: t["Value"] for t in item.get("Tags") or []},
        )

    def created(self) -> datetime | None:
        for fmt in ("%Y-%m-%dT%H:%M:%SZ", "%Y-%m-%d %H:%M:%S"):
            try:
                return datetime.strptime(self.created_at, fmt)
            except ValueError:
                continue
        return None


def create_image(sdk: TencentSdk, instance_id: str, name: str, tags: dict[str, str]) -> str:
    result = sdk.call(
        "cvm",
        "CreateImage",
        {
            "InstanceId": instance_id,
            "ImageName": name,
            "TagSpecification": [{"ResourceType": "image", "Tags": [{"Key": k, "Value": v} for k, v in tags.items()]}],
        },
    )
    return str(result["ImageId"])


def _pages(sdk: TencentSdk, params: dict[str, Any]) -> list[ImageView]:
    out: list[ImageView] = []
    offset = 0
    while True:
        result = sdk.call("cvm", "DescribeImages", {**params, "Offset": offset, "Limit": PAGE})
        items = result.get("ImageSet") or []
        out.extend(ImageView.from_api(i) for i in items)
        offset += len(items)
        if not items or offset >= int(result.get("TotalCount") or 0):
            return out


def describe(sdk: TencentSdk, image_ids: list[str]) -> dict[str, ImageView]:
    if not image_ids:
        return {}
    return {i.image_id: i for i in _pages(sdk, {"ImageIds": image_ids})}


def find_by_tags(sdk: TencentSdk, tags: dict[str, str]) -> list[ImageView]:
    filters = [{"Name": f"tag:{k}", "Values": [v]} for k, v in tags.items()]
    filters.append({"Name": "image-type", "Values": ["PRIVATE_IMAGE"]})
    return _pages(sdk, {"Filters": filters})


def find_by_tag_key(sdk: TencentSdk, key: str) -> list[ImageView]:
    return _pages(
        sdk, {"Filters": [{"Name": "tag-key", "Values": [key]}, {"Name": "image-type", "Values": ["PRIVATE_IMAGE"]}]}
    )


def find_by_name(sdk: TencentSdk, name: str) -> list[ImageView]:
    return [i for i in _pages(sdk, {"Filters": [{"Name": "image-name", "Values": [name]}]}) if i.name == name]


def delete(sdk: TencentSdk, image_ids: list[str]) -> None:
    if image_ids:
        sdk.call("cvm", "DeleteImages", {"ImageIds": image_ids})
