"""The whole life cycle with plain SDK calls (issue 2): an instance uploads to COS with its role's credentials,
becomes an image, an instance from that image sees its files, everything is released and the balance fell by
exactly what the instances cost."""

from __future__ import annotations

from typing import Any

from qcloud_cos import CosS3Client
from tencentcloud.billing.v20180709 import models as billing_models

from tests.emulator.cvm_support import call, run_one, state_of, user_data, wait_for
from tests.emulator_process import EmulatorProcess

ROLE = "cvmjob-trainer"
# The instance finds its role's keys in the metadata service (through the proxy the emulator gave it), then
# uploads with the COS SDK pointed at the emulator: what a training instance with a CAM role does.
UPLOAD = """#!/bin/bash
set -e
echo "made on the first instance" > "$HOME/marker.txt"
python3 - <<'PY'
import json, os, urllib.request
from qcloud_cos import CosConfig, CosS3Client
base = "http://metadata.tencentyun.com/latest/meta-data/"
role = urllib.request.urlopen(base + "cam/security-credentials/").read().decode().strip()
keys = json.loads(urllib.request.urlopen(base + "cam/security-credentials/" + role).read())
host, port = os.environ["TENCENTCLOUD_EMULATOR_ENDPOINT"].split(":")
conf = CosConfig(Region="ap-guangzhou", SecretId=keys["TmpSecretId"], SecretKey=keys["TmpSecretKey"],
                 Token=keys["Token"], Scheme="http", IP=host, Port=int(port))
body = open(os.environ["HOME"] + "/marker.txt", "rb").read()
CosS3Client(conf, retry=0).put_object(Bucket="{bucket}", Key="{key}", Body=body)
PY
"""


def wait_object(cos: CosS3Client, bucket: str, key: str, timeout: float = 30) -> bytes:
    wait_for(lambda: cos.object_exists(Bucket=bucket, Key=key), timeout=timeout, what=f"cos://{bucket}/{key}")
    body: bytes = cos.get_object(Bucket=bucket, Key=key)["Body"].get_raw_stream().read()
    return body


def test_instance_to_image_to_instance_and_the_bill(
    emulator: EmulatorProcess, cvm: Any, billing: Any, cos: CosS3Client, bucket: str
) -> None:
    before = billing.DescribeAccountBalance(billing_models.DescribeAccountBalanceRequest()).Balance
    first = run_one(
        cvm, UserData=user_data(UPLOAD.replace("{bucket}", bucket).replace("{key}", "from-first.txt")), CamRoleName=ROLE
    )
    wait_for(lambda: state_of(cvm, first) == "RUNNING", timeout=30, what="RUNNING")
    assert wait_object(cos, bucket, "from-first.txt") == b"made on the first instance\n"

    image_id = call(cvm, "CreateImage", {"InstanceId": first, "ImageName": "life-cycle"}).ImageId
    wait_for(
        lambda: call(cvm, "DescribeImages", {"ImageIds": [image_id]}).ImageSet[0].ImageState == "NORMAL",
        timeout=30,
        what="image NORMAL",
    )

    second_script = (
        UPLOAD.replace('echo "made on the first instance" > "$HOME/marker.txt"\n', "")
        .replace("{bucket}", bucket)
        .replace("{key}", "seen-by-second.txt")
    )
    second = run_one(cvm, ImageId=image_id, UserData=user_data(second_script), CamRoleName=ROLE)
    assert wait_object(cos, bucket, "seen-by-second.txt") == b"made on the first instance\n"

    call(cvm, "TerminateInstances", {"InstanceIds": [first, second]})
    wait_for(
        lambda: not call(cvm, "DescribeInstances", {"InstanceIds": [first, second]}).InstanceSet,
        timeout=30,
        what="instances gone",
    )
    assert call(cvm, "DescribeInstances", {}).TotalCount == 0

    # The expected amount: each instance's billed seconds (the ledger) at the price InquiryPriceRunInstances
    # quotes for it; the hour frozen at purchase is released with the instances.
    price = call(
        cvm,
        "InquiryPriceRunInstances",
        {"Placement": {"Zone": "ap-guangzhou-3"}, "ImageId": "img-487zeit5", "InstanceType": "S5.MEDIUM4"},
    )
    fen_per_hour = round(price.Price.InstancePrice.UnitPriceDiscount * 100)
    ledger = {line["resource_id"]: line for line in emulator.admin.billing()["ledger"]}
    expected = sum(round(fen_per_hour * ledger[i]["billed_seconds"] / 3600) for i in (first, second))
    after = billing.DescribeAccountBalance(billing_models.DescribeAccountBalanceRequest())
    assert after.FreezeAmount == 0
    assert before - after.Balance == expected
    assert all(ledger[i]["ended_at"] is not None for i in (first, second))
