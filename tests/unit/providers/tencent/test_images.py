from __future__ import annotations

from typing import Any

import pytest

from orchestrator.providers.tencent import StaticCredential, TencentSdk, images
from orchestrator.providers.tencent.images import ImageView
from orchestrator.providers.tencent.vocabulary import ImageState
from tests.emulator_process import EmulatorProcess
from tests.unit.providers.tencent.fakes import PagedList


def image(image_id: str, state: str | None = "NORMAL") -> dict[str, Any]:
    found: dict[str, Any] = {"ImageId": image_id, "ImageName": image_id, "ImageType": "PUBLIC_IMAGE"}
    if state is not None:
        found["ImageState"] = state
    return found


@pytest.mark.parametrize(("wire", "state"), [
    ("NORMAL", ImageState.NORMAL), ("CREATEFAILED", ImageState.CREATEFAILED), ("FROZEN", ImageState.UNKNOWN),
    (None, ImageState.UNKNOWN),
])
def test_an_images_state_is_a_member(wire: str | None, state: ImageState) -> None:
    assert ImageView.from_api(image("img-1", wire)).state is state


def test_a_view_built_with_the_wire_string_holds_the_member() -> None:
    view = ImageView("img-1", "n", "CREATING", "PRIVATE_IMAGE", "", {})  # type: ignore[arg-type]
    assert view.state is ImageState.CREATING and not view.state.ready


def test_public_asks_for_public_images_and_reads_every_page() -> None:
    fake = PagedList([image(f"img-{i:08d}") for i in range(205)], "ImageSet")
    found = images.public(fake)  # type: ignore[arg-type]
    assert [i.image_id for i in found] == [f"img-{i:08d}" for i in range(205)]
    assert {(s, a) for s, a, _ in fake.calls} == {("cvm", "DescribeImages")}
    assert all(p["Filters"] == [{"Name": "image-type", "Values": ["PUBLIC_IMAGE"]}] for _, _, p in fake.calls)
    assert fake.offsets == [0, 100, 200]


def test_public_on_the_emulator_lists_only_public_images(emulator: EmulatorProcess) -> None:
    sdk = TencentSdk(StaticCredential(emulator.secret_id, emulator.secret_key), "ap-guangzhou", emulator.endpoint)
    found = images.public(sdk)
    assert "img-487zeit5" in {i.image_id for i in found}  # the emulator's Ubuntu image (tests/emulator/cvm_support)
    assert {i.image_type for i in found} == {"PUBLIC_IMAGE"}
    assert all(isinstance(i.state, ImageState) for i in found)


def test_only_an_x86_64_image_with_cloud_init_that_is_not_deprecated_boots_a_job() -> None:
    item = {"ImageId": "img-487zeit5", "ImageName": "Ubuntu Server 22.04 LTS 64bit", "ImageState": "NORMAL",
            "ImageType": "PUBLIC_IMAGE", "OsName": "Ubuntu Server 22.04 LTS 64bit", "Architecture": "x86_64",
            "IsSupportCloudinit": True, "ImageDeprecated": False}
    image = ImageView.from_api(item)
    assert image.boots_a_job and image.public and image.os_name == "Ubuntu Server 22.04 LTS 64bit"
    for changed in ({"Architecture": "arm"}, {"IsSupportCloudinit": False}, {"ImageDeprecated": True}):
        assert not ImageView.from_api({**item, **changed}).boots_a_job
    assert not ImageView.from_api({**item, "ImageType": "PRIVATE_IMAGE"}).public
