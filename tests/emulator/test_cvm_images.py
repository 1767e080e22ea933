"""Custom images capture an instance's system disk; instances launched or reset from them get that disk."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from orchestrator.emulator.catalog import PUBLIC_IMAGES
from tests.emulator.cvm_support import (
    IMAGE,
    admin_instance,
    api_error,
    boot,
    call,
    describe,
    run_one,
    user_data,
    wait_file,
    wait_for,
)
from tests.emulator_process import EmulatorProcess

PREPARE = """#!/bin/bash
mkdir -p $HOME/model
echo weights > $HOME/model/weights.bin
ln -s model/weights.bin $HOME/latest
mkfifo $HOME/pipe
cat > $TENCENTCLOUD_EMULATOR_ROOT/var/lib/cloud/scripts/per-boot/10-mark <<'EOF'
#!/bin/bash
date +%s%N >> $HOME/boots
EOF
chmod +x $TENCENTCLOUD_EMULATOR_ROOT/var/lib/cloud/scripts/per-boot/10-mark
echo done > $HOME/prepared
"""


def images(cvm: Any, **params: Any) -> list[Any]:
    return list(call(cvm, "DescribeImages", params).ImageSet)


def image_state(cvm: Any, image_id: str) -> str | None:
    found = images(cvm, ImageIds=[image_id])
    return found[0].ImageState if found else None


def prepared_instance(emulator: EmulatorProcess, cvm: Any) -> tuple[str, Path]:
    instance_id = run_one(cvm, UserData=user_data(PREPARE))
    boot(emulator, cvm, instance_id)
    home = Path(admin_instance(emulator, instance_id)["home"])
    wait_file(home / "prepared")
    return instance_id, home


def create_image(cvm: Any, instance_id: str, name: str, **params: Any) -> str:
    return str(call(cvm, "CreateImage", {"InstanceId": instance_id, "ImageName": name, **params}).ImageId)


def test_create_image_then_launch_from_it(emulator: EmulatorProcess, cvm: Any) -> None:
    source, _ = prepared_instance(emulator, cvm)
    tags = [{"ResourceType": "image", "Tags": [{"Key": "cvmjob:job", "Value": "j1"}]}]
    image_id = create_image(cvm, source, "ckpt-image", ImageDescription="after epoch 3", TagSpecification=tags)
    (image,) = images(cvm, ImageIds=[image_id])
    assert (image.ImageState, image.ImageType, image.ImageSource, image.ImageName) == (
        "CREATING", "PRIVATE_IMAGE", "CREATE_IMAGE", "ckpt-image")
    assert image.IsSupportCloudinit and image.ImageDescription == "after epoch 3"
    (inst,) = describe(cvm, source)
    assert (inst.LatestOperation, inst.LatestOperationState) == ("CreateImage", "OPERATING")
    with api_error("InvalidParameterValue.InvalidImageState"):
        run_one(cvm, ImageId=image_id)
    with api_error("InvalidImageId.IncorrectState"):
        call(cvm, "DeleteImages", {"ImageIds": [image_id]})
    emulator.admin.advance(1)
    wait_for(lambda: image_state(cvm, image_id) == "NORMAL", what="the image to be NORMAL")
    (inst,) = describe(cvm, source)
    assert inst.LatestOperationState == "SUCCESS"

    copy = run_one(cvm, ImageId=image_id)
    boot(emulator, cvm, copy)
    home = Path(admin_instance(emulator, copy)["home"])
    assert (home / "model/weights.bin").read_text() == "weights\n"
    assert (home / "latest").is_symlink() and (home / "latest").read_text() == "weights\n"
    assert not (home / "pipe").exists()  # FIFOs are not captured
    wait_file(home / "boots")  # the captured per-boot script runs at the new instance's boots
    assert (home / "prepared").read_text() == "done\n"  # captured; no UserData ran on the copy
    (launched,) = describe(cvm, copy)
    assert launched.ImageId == image_id


def test_describe_and_delete_images(emulator: EmulatorProcess, cvm: Any) -> None:
    source = run_one(cvm)
    boot(emulator, cvm, source)
    tags = [{"ResourceType": "image", "Tags": [{"Key": "team", "Value": "vision"}]}]
    first = create_image(cvm, source, "resnet-epoch-1", TagSpecification=tags)
    emulator.admin.advance(1)
    wait_for(lambda: image_state(cvm, first) == "NORMAL", what="the first image")
    second = create_image(cvm, source, "bert-epoch-1")
    with api_error("OperationDenied.InstanceOperationInProgress"):
        create_image(cvm, source, "one-at-a-time")
    emulator.admin.advance(1)
    wait_for(lambda: image_state(cvm, second) == "NORMAL", what="the second image")
    everything = call(cvm, "DescribeImages", {"Limit": 100})
    assert everything.TotalCount == len(everything.ImageSet) == len(PUBLIC_IMAGES) + 2  # and the 2 private
    assert IMAGE in {i.ImageId for i in everything.ImageSet}

    def ids(name: str, *values: str) -> set[str]:
        return {i.ImageId for i in images(cvm, Filters=[{"Name": name, "Values": list(values)}])}

    assert ids("image-type", "PRIVATE_IMAGE") == {first, second}
    assert IMAGE in ids("image-type", "PUBLIC_IMAGE")
    assert ids("image-name", "epoch") == {first, second}  # fuzzy
    assert ids("tag:team", "vision") == {first}
    assert ids("image-id", second) == {second}
    with api_error("InvalidParameter.InvalidParameterCoexistImageIdsFilters"):
        images(cvm, ImageIds=[first], Filters=[{"Name": "image-type", "Values": ["PRIVATE_IMAGE"]}])
    with api_error("InvalidImageName.Duplicate"):
        create_image(cvm, source, "resnet-epoch-1")
    with api_error("InvalidParameter.ValueTooLarge"):
        create_image(cvm, source, "x" * 61)
    with api_error("InvalidInstanceId.NotFound"):
        create_image(cvm, "ins-00000000", "nothing")
    with api_error("InvalidParameterValue.InvalidImageId"):
        call(cvm, "DeleteImages", {"ImageIds": [IMAGE]})

    call(cvm, "DeleteImages", {"ImageIds": [first]})
    assert image_state(cvm, first) is None
    state_dir = emulator.state_dir
    wait_for(lambda: not (state_dir / "images" / first).exists(), what="the captured tree to go")
    with api_error("InvalidImageId.NotFound"):
        call(cvm, "DeleteImages", {"ImageIds": [first]})
    with api_error("InvalidImageId.NotFound"):
        run_one(cvm, ImageId=first)


def test_reset_instance_reimages_and_reruns_user_data(emulator: EmulatorProcess, cvm: Any) -> None:
    instance_id, home = prepared_instance(emulator, cvm)
    call(cvm, "ResetInstance", {"InstanceId": instance_id,
                                "UserData": user_data("#!/bin/bash\necho again > $HOME/reset\n")})
    (inst,) = describe(cvm, instance_id)
    assert (inst.InstanceState, inst.LatestOperation, inst.LatestOperationState) == (
        "REBOOTING", "ResetInstance", "OPERATING")
    emulator.admin.advance(1)
    assert wait_file(home / "reset") == "again\n"
    assert not (home / "prepared").exists()  # a fresh system disk from the public image
    (inst,) = describe(cvm, instance_id)
    assert (inst.InstanceState, inst.LatestOperationState) == ("RUNNING", "SUCCESS")
    with api_error("InvalidImageId.NotFound"):
        call(cvm, "ResetInstance", {"InstanceId": instance_id, "ImageId": "img-00000000"})


def test_injected_image_faults_fail_or_hang_a_capture_until_cleared(emulator: EmulatorProcess, cvm: Any) -> None:
    source, _ = prepared_instance(emulator, cvm)
    emulator.admin.add_image_faults("fail")
    failed = create_image(cvm, source, "fails")
    wait_for(lambda: image_state(cvm, failed) == "CREATEFAILED")
    emulator.admin.add_image_faults("hang")
    hung = create_image(cvm, source, "hangs")
    emulator.admin.advance(3600)
    assert image_state(cvm, hung) == "CREATING"
    emulator.admin.clear_faults()
    wait_for(lambda: image_state(cvm, hung) == "NORMAL")
    assert image_state(cvm, create_image(cvm, source, "plain")) in ("CREATING", "NORMAL")
