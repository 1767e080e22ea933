"""The instance metadata service, reached the way an instance reaches it: through its HTTP proxy."""

from __future__ import annotations

import json
import re
from typing import Any

from tests.emulator.cvm_support import ZONE, admin_instance, boot, metadata, run_one, user_data
from tests.emulator_process import EmulatorProcess

CST_TIME = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d$")


def test_instance_metadata_paths(emulator: EmulatorProcess, cvm: Any) -> None:
    instance_id = run_one(cvm, InstanceName="meta", UserData=user_data("echo hi\n"))
    boot(emulator, cvm, instance_id)
    me = admin_instance(emulator, instance_id)

    def get(path: str) -> str:
        status, body = metadata(emulator, me, path)
        assert status == 200, path
        return body

    assert get("/latest/meta-data/instance-id") == instance_id
    assert get("/1.0/meta-data/instance-id") == get("/2017-09-19/meta-data/instance-id") == instance_id
    assert get("/latest/meta-data/instance-name") == "meta"
    assert get("/latest/meta-data/local-ipv4").startswith("127.16.")  # its own address on this machine
    assert re.match(r"^52:54:00(:[0-9a-f]{2}){3}$", get("/latest/meta-data/mac"))
    assert get("/latest/meta-data/placement/region") == "ap-guangzhou"
    assert get("/latest/meta-data/placement/zone") == ZONE
    assert get("/latest/meta-data/payment/charge-type") == "POSTPAID_BY_HOUR"
    assert CST_TIME.match(get("/latest/meta-data/payment/create-time"))
    assert get("/latest/meta-data/app-id") == emulator.appid
    assert get("/latest/meta-data/instance/instance-type") == "S5.MEDIUM4"
    assert get("/latest/meta-data/instance/image-id") == "img-487zeit5"
    assert len(get("/latest/meta-data/uuid")) == 36
    assert get("/latest/user-data") == "echo hi\n"
    assert get("/") == "1.0\n2017-09-19\nlatest"
    assert get("/latest/") == "meta-data/\nuser-data"
    listing = get("/latest/meta-data/").split("\n")
    assert {"instance-id", "local-ipv4", "placement/", "payment/", "instance/", "network/"} <= set(listing)
    assert "spot/" not in listing and "cam/" not in listing
    assert get("/latest/meta-data/placement") == "region\nzone"
    mac = get("/latest/meta-data/mac")
    assert get(f"/latest/meta-data/network/interfaces/macs/{mac}/vpc-id").startswith("vpc-")
    for missing in ("/latest/meta-data/public-ipv4", "/latest/meta-data/spot/termination-time",
                    "/latest/meta-data/nothing", "/latest/meta-data/cam/security-credentials/", "/9.9/meta-data/"):
        assert metadata(emulator, me, missing)[0] == 404, missing


def test_only_the_instance_itself_sees_its_metadata(emulator: EmulatorProcess, cvm: Any) -> None:
    instance_id = run_one(cvm)
    me = admin_instance(emulator, instance_id)
    assert metadata(emulator, None, "/latest/meta-data/instance-id")[0] == 404
    forged = {**me, "proxy": me["proxy"].replace(f"{instance_id}:", f"{instance_id}:x")}
    assert metadata(emulator, forged, "/latest/meta-data/instance-id")[0] == 404
    no_user_data = metadata(emulator, me, "/latest/user-data")
    assert no_user_data[0] == 404


def test_role_credentials(emulator: EmulatorProcess, cvm: Any) -> None:
    instance_id = run_one(cvm, CamRoleName="trainer-role")
    me = admin_instance(emulator, instance_id)
    assert metadata(emulator, me, "/latest/meta-data/cam/security-credentials/") == (200, "trainer-role")
    status, body = metadata(emulator, me, "/latest/meta-data/cam/security-credentials/trainer-role")
    first = json.loads(body)
    assert status == 200 and first["Code"] == "Success"
    assert set(first) == {"TmpSecretId", "TmpSecretKey", "ExpiredTime", "Expiration", "Token", "Code"}
    assert abs(first["ExpiredTime"] - (emulator.admin.now() + 7200)) < 5
    again = json.loads(metadata(emulator, me, "/latest/meta-data/cam/security-credentials/trainer-role")[1])
    assert again["TmpSecretId"] == first["TmpSecretId"]  # cached while more than 5 minutes remain
    emulator.admin.advance(7200 - 200)
    renewed = json.loads(metadata(emulator, me, "/latest/meta-data/cam/security-credentials/trainer-role")[1])
    assert renewed["TmpSecretId"] != first["TmpSecretId"]
    assert metadata(emulator, me, "/latest/meta-data/cam/security-credentials/other-role")[0] == 404


def test_prepaid_termination_time(emulator: EmulatorProcess, cvm: Any) -> None:
    instance_id = run_one(cvm, InstanceChargeType="PREPAID", InstanceChargePrepaid={"Period": 1})
    me = admin_instance(emulator, instance_id)
    status, body = metadata(emulator, me, "/latest/meta-data/payment/termination-time")
    assert status == 200 and CST_TIME.match(body)
