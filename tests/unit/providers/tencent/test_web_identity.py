"""A web identity as cvmjob's keys: its place in the chain, its configuration errors, the exchange through the real
SDK against the emulator, the refresh near expiry, and GitHub Actions' token request."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from orchestrator.providers.tencent import StaticCredential, TencentSdk, errors, web_identity
from orchestrator.providers.tencent.credentials import find_user_credential
from orchestrator.providers.tencent.errors import CredentialConfigError
from orchestrator.providers.tencent.web_identity import WebIdentityConfig, from_environment
from tests.emulator_process import EmulatorProcess
from tests.oidc import PROVIDER_ID, RUNNER_BEARER, Issuer, configure, github_token_endpoint

REGION = "ap-guangzhou"
ROLE_ARN = "qcs::cam::uin/100000000001:roleName/cvmjob-ci"
VARIABLES = (
    "TENCENTCLOUD_SECRET_ID", "TENCENTCLOUD_SECRET_KEY", "TENCENTCLOUD_PROFILE", web_identity.ROLE_ARN,
    web_identity.PROVIDER_ID, web_identity.TOKEN_FILE, web_identity.GITHUB_URL, web_identity.GITHUB_BEARER,
    web_identity.AUDIENCE, web_identity.SESSION_NAME,
)


@pytest.fixture(autouse=True)
def no_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in VARIABLES:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(scope="module")
def issuer() -> Issuer:
    return Issuer()


def balance(sdk: TencentSdk) -> int:
    return int(sdk.call("billing", "DescribeAccountBalance", {})["Balance"])


def exchanges(emulator: EmulatorProcess) -> int:
    return len(emulator.admin.calls(service="sts", action="AssumeRoleWithWebIdentity"))


# -- configuration -------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("env", "named"),
    [
        ({web_identity.ROLE_ARN: ROLE_ARN, web_identity.TOKEN_FILE: "{token}"}, web_identity.PROVIDER_ID),
        ({web_identity.ROLE_ARN: ROLE_ARN, web_identity.PROVIDER_ID: "github"}, web_identity.TOKEN_FILE),
        ({web_identity.ROLE_ARN: ROLE_ARN, web_identity.PROVIDER_ID: "github", web_identity.TOKEN_FILE: "/nope"},
         "/nope"),
        ({web_identity.ROLE_ARN: ROLE_ARN, web_identity.PROVIDER_ID: "github", web_identity.GITHUB_URL: "http://x"},
         web_identity.GITHUB_BEARER),
        ({web_identity.ROLE_ARN: ROLE_ARN, web_identity.PROVIDER_ID: "github", web_identity.GITHUB_BEARER: "b"},
         web_identity.GITHUB_URL),
        ({web_identity.PROVIDER_ID: "github", web_identity.TOKEN_FILE: "{token}"}, web_identity.ROLE_ARN),
        ({web_identity.ROLE_ARN: "cvmjob-ci", web_identity.PROVIDER_ID: "github"}, "roleName"),
        ({web_identity.ROLE_ARN: ROLE_ARN, web_identity.PROVIDER_ID: "github", web_identity.TOKEN_FILE: "{token}",
          web_identity.SESSION_NAME: "a"}, web_identity.SESSION_NAME),
    ],
    ids=["no-provider", "no-token", "no-token-file", "url-without-token", "token-without-url", "no-role", "bad-arn",
         "bad-session-name"],
)
def test_a_configuration_given_by_halves_names_what_to_set(env: dict[str, str], named: str, tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("jwt")
    with pytest.raises(CredentialConfigError) as err:
        from_environment({k: v.format(token=token) for k, v in env.items()})
    assert named in str(err.value)
    assert err.value.exit_code == 3


def test_githubs_variables_alone_configure_nothing() -> None:
    """GitHub sets them in every job allowed OIDC, whether or not it is meant for Tencent Cloud."""
    assert from_environment({web_identity.GITHUB_URL: "http://x", web_identity.GITHUB_BEARER: "b"}) is None


def test_the_web_identity_comes_after_the_environment_keys_and_before_the_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / ".tencentcloud").mkdir()
    (tmp_path / ".tencentcloud" / "credentials").write_text("[default]\nsecret_id = AKIDini\nsecret_key = k\n")
    (tmp_path / "token").write_text("jwt")
    monkeypatch.setenv(web_identity.ROLE_ARN, ROLE_ARN)
    monkeypatch.setenv(web_identity.PROVIDER_ID, "github")
    monkeypatch.setenv(web_identity.TOKEN_FILE, str(tmp_path / "token"))
    found = find_user_credential(tmp_path)  # lazy: nothing is exchanged (there is no STS to reach here)
    assert found is not None
    assert found.source == f"web identity (token file {tmp_path / 'token'}) as role {ROLE_ARN}"
    monkeypatch.setenv("TENCENTCLOUD_SECRET_ID", "AKIDenv")
    monkeypatch.setenv("TENCENTCLOUD_SECRET_KEY", "k")
    found = find_user_credential(tmp_path)
    assert found is not None and found.credential.secret_id == "AKIDenv"


# -- against the emulator ------------------------------------------------------------------------------------
def test_the_chain_trades_a_token_file_for_the_roles_keys(
    emulator: EmulatorProcess, issuer: Issuer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    role_arn = configure(emulator, issuer)
    token = tmp_path / "token"
    token.write_text(issuer.token(emulator.admin.now()) + "\n")
    monkeypatch.setenv(web_identity.ROLE_ARN, role_arn)
    monkeypatch.setenv(web_identity.PROVIDER_ID, PROVIDER_ID)
    monkeypatch.setenv(web_identity.TOKEN_FILE, str(token))
    found = find_user_credential(tmp_path, endpoint=emulator.endpoint)
    assert found is not None and exchanges(emulator) == 0
    sdk = TencentSdk(found.credential, REGION, emulator.endpoint)
    assert balance(sdk) == 10_000_000
    with pytest.raises(errors.AuthError) as err:  # outside the role's policy
        sdk.call("cvm", "DescribeZones", {})
    assert err.value.code == "AuthFailure.UnauthorizedOperation"
    assert exchanges(emulator) == 1
    again = find_user_credential(tmp_path, endpoint=emulator.endpoint)  # another connect() of the same process
    assert again is not None and again.credential is found.credential
    assert balance(TencentSdk(again.credential, REGION, emulator.endpoint)) == 10_000_000
    assert exchanges(emulator) == 1  # the keys it has, not a new exchange


def test_keys_are_traded_again_with_a_fresh_token_when_they_near_expiry(
    emulator: EmulatorProcess, issuer: Issuer, tmp_path: Path
) -> None:
    token = tmp_path / "token"
    token.write_text(issuer.token(emulator.admin.now()))
    config = WebIdentityConfig(configure(emulator, issuer), PROVIDER_ID, web_identity.TokenFile(token))
    keys = config.credential(emulator.endpoint, now=emulator.admin.now)
    first = keys.get_credential_info()
    sdk = TencentSdk(keys, REGION, emulator.endpoint)
    assert balance(sdk) == 10_000_000
    emulator.admin.advance(web_identity.DURATION_SECONDS - 1400)  # 1400 s left: less than a fifth of 7200
    # The token of the first exchange has long expired; whoever wrote the file has written a new one.
    token.write_text(issuer.token(emulator.admin.now()))
    second = keys.get_credential_info()
    assert second != first and exchanges(emulator) == 2
    emulator.admin.advance(1500)  # the first keys are past their expiry, the second far from it
    assert balance(sdk) == 10_000_000
    assert keys.get_credential_info() == second and exchanges(emulator) == 2
    stale = TencentSdk(StaticCredential(*first), REGION, emulator.endpoint)
    with pytest.raises(errors.AuthError) as err:
        balance(stale)
    assert err.value.code == "AuthFailure.TokenFailure"


def test_a_refused_token_is_an_auth_error_with_stss_code(
    emulator: EmulatorProcess, issuer: Issuer, tmp_path: Path
) -> None:
    token = tmp_path / "token"
    token.write_text(Issuer(kid=issuer.kid).token(emulator.admin.now()))  # signed by another key
    config = WebIdentityConfig(configure(emulator, issuer), PROVIDER_ID, web_identity.TokenFile(token))
    sdk = TencentSdk(config.credential(emulator.endpoint), REGION, emulator.endpoint)
    with pytest.raises(errors.AuthError) as err:
        balance(sdk)
    assert err.value.code == "InvalidParameter.WebIdentityTokenError"


@pytest.fixture
def github(issuer: Issuer, emulator: EmulatorProcess) -> Iterator[tuple[str, list[dict[str, str]]]]:
    with github_token_endpoint(issuer, emulator.admin.now) as endpoint:
        yield endpoint


def test_github_actions_token_request(
    emulator: EmulatorProcess, issuer: Issuer, github: tuple[str, list[dict[str, str]]]
) -> None:
    url, seen = github
    role_arn = configure(emulator, issuer)
    env = {web_identity.ROLE_ARN: role_arn, web_identity.PROVIDER_ID: PROVIDER_ID, web_identity.GITHUB_URL: url,
           web_identity.GITHUB_BEARER: RUNNER_BEARER}
    config = from_environment(env)
    assert config is not None and config.describe() == f"web identity (GitHub OIDC) as role {role_arn}"
    assert balance(TencentSdk(config.credential(emulator.endpoint), REGION, emulator.endpoint)) == 10_000_000
    assert seen == [{"authorization": f"bearer {RUNNER_BEARER}", "api-version": "2.0",
                     "audience": "sts.tencentcloudapi.com"}]
    refused = from_environment({**env, web_identity.GITHUB_BEARER: "wrong"})
    assert refused is not None
    with pytest.raises(errors.AuthError, match="HTTP 401"):
        refused.token.read()
