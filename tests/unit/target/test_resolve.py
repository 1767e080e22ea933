from __future__ import annotations

import json
from pathlib import Path

import pytest

from orchestrator.errors import EXIT_CLOUD_ERROR
from orchestrator.providers.tencent.credentials import find_user_credential
from orchestrator.target import Target, TargetError, embedded, refuse_silent_emulator, resolve


@pytest.fixture(autouse=True)
def no_keys(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in (
        "TENCENTCLOUD_SECRET_ID",
        "TENCENTCLOUD_SECRET_KEY",
        "TENCENTCLOUD_APPID",
        "CVMJOB_ENDPOINT",
        "CVMJOB_EMULATOR",
        "TENCENTCLOUD_PROFILE",
        "CI",
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


@pytest.fixture
def started(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """embedded.ensure_running, recorded instead of starting an emulator process; the endpoints it handed out."""
    endpoints: list[str] = []

    def ensure_running(timeout: float = 60.0) -> embedded.EmbeddedEmulator:
        endpoints.append("127.0.0.1:1")
        return embedded.EmbeddedEmulator(endpoints[-1], 1, Path("/nonexistent"))

    monkeypatch.setattr(embedded, "ensure_running", ensure_running)
    return endpoints


CI_SET = ["true", "TRUE", "1", "yes", "woodpecker"]
CI_UNSET = [None, "", "false", "False", "0", "no"]


def ci(monkeypatch: pytest.MonkeyPatch, value: str | None) -> None:
    if value is not None:
        monkeypatch.setenv("CI", value)


@pytest.mark.parametrize("value", CI_SET)
def test_under_ci_no_keys_and_no_emulator_asked_for_is_refused_naming_every_place_looked(
    monkeypatch: pytest.MonkeyPatch, started: list[str], value: str
) -> None:
    ci(monkeypatch, value)
    for refuse in (lambda: resolve("ap-guangzhou"), refuse_silent_emulator):
        with pytest.raises(TargetError) as raised:
            refuse()
        assert raised.value.exit_code == EXIT_CLOUD_ERROR
        message = str(raised.value)
        assert message.startswith("CI is set and no Tencent Cloud credentials were found")
        for looked in ("TENCENTCLOUD_SECRET_ID/TENCENTCLOUD_SECRET_KEY", "~/.tencentcloud/credentials [default]",
                       "~/.tccli/default.credential", "the CAM role", "TENCENTCLOUD_ROLE_ARN", "--emulator",
                       "CVMJOB_EMULATOR=1"):
            assert looked in message, looked
    assert started == []  # refused before any emulator starts
    monkeypatch.setenv("TENCENTCLOUD_PROFILE", "ci")
    with pytest.raises(TargetError, match=r"credentials \[ci\], ~/.tccli/ci.credential"):
        resolve("ap-guangzhou")


@pytest.mark.parametrize("value", CI_UNSET)
def test_outside_ci_no_keys_fall_back_to_the_embedded_emulator(
    monkeypatch: pytest.MonkeyPatch, started: list[str], value: str | None
) -> None:
    ci(monkeypatch, value)
    refuse_silent_emulator()
    target = resolve("ap-guangzhou")
    assert (target.kind, target.embedded, target.endpoint) == ("emulator", True, "127.0.0.1:1")
    assert started == ["127.0.0.1:1"]


@pytest.mark.parametrize("value", [*CI_SET[:1], *CI_UNSET[:1]])
@pytest.mark.parametrize("asked", ["--emulator", "CVMJOB_EMULATOR=1", "CVMJOB_ENDPOINT"])
def test_an_emulator_asked_for_is_used_with_or_without_ci_and_keys(
    monkeypatch: pytest.MonkeyPatch, started: list[str], value: str | None, asked: str
) -> None:
    ci(monkeypatch, value)
    if asked == "CVMJOB_EMULATOR=1":
        monkeypatch.setenv("CVMJOB_EMULATOR", "1")
    elif asked == "CVMJOB_ENDPOINT":
        monkeypatch.setenv("CVMJOB_ENDPOINT", "127.0.0.1:9000")
    force = asked == "--emulator"
    refuse_silent_emulator(force)
    target = resolve("ap-guangzhou", force)
    assert target.kind == "emulator"
    assert (target.embedded, target.endpoint) == ((False, "127.0.0.1:9000") if asked == "CVMJOB_ENDPOINT" else
                                                  (True, "127.0.0.1:1"))
    monkeypatch.setenv("TENCENTCLOUD_SECRET_ID", "AKIDenv")  # keys do not outrank an emulator asked for
    monkeypatch.setenv("TENCENTCLOUD_SECRET_KEY", "k")
    assert resolve("ap-guangzhou", force).kind == "emulator"


@pytest.mark.parametrize("value", [*CI_SET[:1], *CI_UNSET[:1]])
@pytest.mark.parametrize("source", ["environment", "sdk profile", "tccli"])
def test_keys_found_anywhere_in_the_chain_reach_tencent_cloud_with_or_without_ci(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, started: list[str], value: str | None, source: str
) -> None:
    ci(monkeypatch, value)
    monkeypatch.setenv("TENCENTCLOUD_APPID", "1300000001")
    if source == "environment":
        monkeypatch.setenv("TENCENTCLOUD_SECRET_ID", "AKIDenv")
        monkeypatch.setenv("TENCENTCLOUD_SECRET_KEY", "k")
    elif source == "sdk profile":
        (tmp_path / ".tencentcloud").mkdir()
        (tmp_path / ".tencentcloud" / "credentials").write_text("[default]\nsecret_id = AKIDini\nsecret_key = k\n")
    else:
        (tmp_path / ".tccli").mkdir()
        (tmp_path / ".tccli" / "default.credential").write_text(json.dumps({"secretId": "AKIDt", "secretKey": "k"}))
    refuse_silent_emulator()
    target = resolve("ap-guangzhou")
    assert (target.kind, target.endpoint) == ("tencent", None)
    assert started == []
