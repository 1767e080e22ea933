from __future__ import annotations

import json
from pathlib import Path

import pytest

from orchestrator.providers.tencent.credentials import find_user_credential
from orchestrator.target import Target, TargetError, resolve


@pytest.fixture(autouse=True)
def no_keys(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in (
        "TENCENTCLOUD_SECRET_ID",
        "TENCENTCLOUD_SECRET_KEY",
        "TENCENTCLOUD_APPID",
        "CVMJOB_ENDPOINT",
        "CVMJOB_EMULATOR",
        "TENCENTCLOUD_PROFILE",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))


def test_credentials_come_from_the_environment_then_the_sdk_profile_then_tccli(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert find_user_credential(tmp_path) is None
    (tmp_path / ".tccli").mkdir()
    (tmp_path / ".tccli" / "default.credential").write_text(json.dumps({"secretId": "AKIDtccli", "secretKey": "k1"}))
    found = find_user_credential(tmp_path)
    assert found is not None and found.credential.secret_id == "AKIDtccli"
    (tmp_path / ".tencentcloud").mkdir()
    (tmp_path / ".tencentcloud" / "credentials").write_text("[default]\nsecret_id = AKIDini\nsecret_key = k2\n")
    found = find_user_credential(tmp_path)
    assert found is not None and found.credential.secret_id == "AKIDini"
    monkeypatch.setenv("TENCENTCLOUD_SECRET_ID", "AKIDenv")
    monkeypatch.setenv("TENCENTCLOUD_SECRET_KEY", "k3")
    found = find_user_credential(tmp_path)
    assert found is not None and found.credential.secret_id == "AKIDenv"


def test_an_emulator_endpoint_is_used_as_is(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CVMJOB_ENDPOINT", "127.0.0.1:9000")
    target = resolve("ap-guangzhou")
    assert target == Target(
        "emulator", "ap-guangzhou", "1250000000", "127.0.0.1:9000", credential_source="the emulator's default keys"
    )
    assert Target.from_json(target.to_json()) == target
    assert "secret" not in json.dumps(target.to_json()).lower()


def test_tencent_cloud_keys_without_an_appid_say_what_to_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TENCENTCLOUD_SECRET_ID", "AKIDenv")
    monkeypatch.setenv("TENCENTCLOUD_SECRET_KEY", "k")
    with pytest.raises(TargetError, match="TENCENTCLOUD_APPID"):
        resolve("ap-guangzhou")
    monkeypatch.setenv("TENCENTCLOUD_APPID", "1300000001")
    target = resolve("ap-guangzhou")
    assert target.kind == "tencent" and target.appid == "1300000001" and target.endpoint is None
