"""Images: create a custom one from an instance, look up and list them (by id, tag, name; the public ones),
delete (retention)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ._sdk import TencentSdk
from .paging import pages
from .vocabulary import ImageState

_PRIVATE = {"Name": "image-type", "Values": ["PRIVATE_IMAGE"]}
_PUBLIC = {"Name": "image-type", "Values": ["PUBLIC_IMAGE"]}


@dataclass(frozen=True)
class ImageView:
    image_id: str
    name: str
    state: ImageState
    image_type: str
    created_at: str
    tags: dict[str, str]
    os_name: str = ""  # the operating system it holds (a custom image: its base image's)
    architecture: str = "x86_64"
    cloud_init: bool = True  # IsSupportCloudinit: the UserData runs at its first boot
    deprecated: bool = False

    def __post_init__(self) -> None:
        # A view built by hand (a test, the fault model) may be given the wire string: the record holds a member.
        object.__setattr__(self, "state", ImageState(self.state))

    @classmethod
    def from_api(cls, item: dict[str, Any]) -> ImageView:
        return cls(
            image_id=item["ImageId"],
            name=item.get("ImageName", ""),
            state=ImageState(item.get("ImageState")),
            image_type=item.get("ImageType", ""),
            created_at=item.get("CreatedTime") or "",
            tags={t["Key"]: t["Value"] for t in item.get("Tags") or []},
            os_name=item.get("OsName", ""),
            architecture=item.get("Architecture") or "x86_64",
            cloud_init=bool(item.get("IsSupportCloudinit", True)),
            deprecated=bool(item.get("ImageDeprecated", False)),
        )

    @property
    def boots_a_job(self) -> bool:
        """An x86_64 image with cloud-init (the bootstrap is UserData), not deprecated."""
        return self.architecture == "x86_64" and self.cloud_init and not self.deprecated

    @property
    def public(self) -> bool:
        """One of Tencent's public images, as it ships (a custom image may have had anything installed since)."""
        return self.image_type == "PUBLIC_IMAGE"

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


def _described(sdk: TencentSdk, params: dict[str, Any]) -> list[ImageView]:
    return [ImageView.from_api(i) for i in pages(sdk, "cvm", "DescribeImages", params, "ImageSet")]


def describe(sdk: TencentSdk, image_ids: list[str]) -> dict[str, ImageView]:
    if not image_ids:
        return {}
    return {i.image_id: i for i in _described(sdk, {"ImageIds": image_ids})}


def find_by_tags(sdk: TencentSdk, tags: dict[str, str]) -> list[ImageView]:
    filters = [{"Name": f"tag:{k}", "Values": [v]} for k, v in tags.items()]
    return _described(sdk, {"Filters": [*filters, _PRIVATE]})


def find_by_tag_key(sdk: TencentSdk, key: str) -> list[ImageView]:
    return _described(sdk, {"Filters": [{"Name": "tag-key", "Values": [key]}, _PRIVATE]})


def find_by_name(sdk: TencentSdk, name: str) -> list[ImageView]:
    return [i for i in _described(sdk, {"Filters": [{"Name": "image-name", "Values": [name]}]}) if i.name == name]


def public(sdk: TencentSdk) -> list[ImageView]:
    """The public images of the region a job can boot: Tencent's own OS images for x86_64 types, with cloud-init
    (the bootstrap is UserData), not deprecated: what a plan picks from when the spec names none."""
    return [i for i in _described(sdk, {"Filters": [_PUBLIC]}) if i.boots_a_job]


def delete(sdk: TencentSdk, image_ids: list[str]) -> None:
    if image_ids:
        sdk.call("cvm", "DeleteImages", {"ImageIds": image_ids})
