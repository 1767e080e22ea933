"""STS AssumeRoleWithWebIdentity: unsigned (``Authorization: SKIP``), a JWT verified against the provider's JWKS,
issuer, audience and times on the cloud clock, and keys bound by the role's policy; through the SDK's own
OIDCRoleArnCredential and CommonClient, as a user would call it."""

from __future__ import annotations

import time
from typing import Any

import pytest
import requests
from qcloud_cos.cos_exception import CosServiceError
from tencentcloud.billing.v20180709 import billing_client
from tencentcloud.billing.v20180709 import models as billing_models
from tencentcloud.common import credential
from tencentcloud.common.common_client import CommonClient
from tencentcloud.common.exception.tencent_cloud_sdk_exception import TencentCloudSDKException
from tencentcloud.cvm.v20170312 import cvm_client
from tencentcloud.cvm.v20170312 import models as cvm_models
from tencentcloud.sts.v20180813 import models as sts_models

from orchestrator.emulator.client import AdminError
from orchestrator.emulator.sts.models import WebIdentity
from tests.emulator.conftest import REGION, make_cos, profile
from tests.emulator_process import EmulatorProcess
from tests.oidc import AUDIENCE, PROVIDER_ID, ROLE_NAME, SUBJECT, Issuer, configure


@pytest.fixture(scope="module")
def issuer() -> Issuer:
    return Issuer()


@pytest.fixture
def role_arn(emulator: EmulatorProcess, issuer: Issuer) -> str:
    return configure(emulator, issuer)


def unsigned_sts(emulator: EmulatorProcess) -> CommonClient:
    return CommonClient("sts", "2018-08-13", None, REGION, profile(emulator))


def assume(emulator: EmulatorProcess, token: str, role_arn: str, **params: Any) -> dict[str, Any]:
    body = {"ProviderId": PROVIDER_ID, "WebIdentityToken": token, "RoleArn": role_arn, "RoleSessionName": "ci",
            **params}
    answer: dict[str, Any] = unsigned_sts(emulator).call_json(
        "AssumeRoleWithWebIdentity", body, options={"SkipSign": True}
    )["Response"]
    return answer


def refused(emulator: EmulatorProcess, token: str, role_arn: str, **params: Any) -> str:
    with pytest.raises(TencentCloudSDKException) as err:
        assume(emulator, token, role_arn, **params)
    return str(err.value.code)


def test_the_sdks_oidc_credential_gets_keys_bound_by_the_roles_policy(
    emulator: EmulatorProcess, issuer: Issuer, role_arn: str, bucket: str
) -> None:
    oidc = credential.OIDCRoleArnCredential(
        REGION, PROVIDER_ID, issuer.token(emulator.admin.now()), role_arn, "ci", endpoint=f"http://{emulator.endpoint}"
    )
    billing = billing_client.BillingClient(oidc, REGION, profile(emulator))
    assert billing.DescribeAccountBalance(billing_models.DescribeAccountBalanceRequest()).Balance == 10_000_000
    with pytest.raises(TencentCloudSDKException) as err:
        cvm_client.CvmClient(oidc, REGION, profile(emulator)).DescribeZones(cvm_models.DescribeZonesRequest())
    assert err.value.code == "AuthFailure.UnauthorizedOperation"
    cos = make_cos(emulator, *oidc.get_credential_info())
    cos.put_object(Bucket=bucket, Key="ci/model.pt", Body=b"weights")
    with pytest.raises(CosServiceError) as denied:
        cos.put_object(Bucket=bucket, Key="elsewhere/model.pt", Body=b"weights")
    assert denied.value.get_error_code() == "AccessDenied"
    assert [c["action"] for c in emulator.admin.calls(service="sts")] == ["AssumeRoleWithWebIdentity"]


def test_the_answer_has_the_documented_fields_and_duration(
    emulator: EmulatorProcess, issuer: Issuer, role_arn: str
) -> None:
    now = emulator.admin.now()
    answer = assume(emulator, issuer.token(now), role_arn, DurationSeconds=3600)
    assert set(answer) == {"Credentials", "ExpiredTime", "Expiration", "RequestId"}
    assert set(answer["Credentials"]) == {"TmpSecretId", "TmpSecretKey", "Token"}
    assert abs(answer["ExpiredTime"] - (now + 3600)) < 5
    assert refused(emulator, issuer.token(now), role_arn, DurationSeconds=43201) == "InvalidParameter.OverTimeError"


def test_a_signed_call_is_taken_too(emulator: EmulatorProcess, issuer: Issuer, role_arn: str, sts: Any) -> None:
    """The typed client signs every call, this one too (only the raw SkipSign option sends it unsigned)."""
    request = sts_models.AssumeRoleWithWebIdentityRequest()
    request._deserialize({"ProviderId": PROVIDER_ID, "WebIdentityToken": issuer.token(emulator.admin.now()),
                          "RoleArn": role_arn, "RoleSessionName": "ci"})
    assert sts.AssumeRoleWithWebIdentity(request).Credentials.TmpSecretId.startswith("AKID")


@pytest.mark.parametrize(
    ("claims", "code"),
    [
        ({"iss": "https://issuer.example.com"}, "InvalidParameter.WebIdentityTokenError"),
        ({"aud": "someone-else"}, "InvalidParameter.WebIdentityTokenError"),
        ({"exp": 1}, "InvalidParameter.WebIdentityTokenError"),
        ({"iat": 4_000_000_000, "exp": 4_000_000_300}, "InvalidParameter.WebIdentityTokenError"),
        ({"nbf": 4_000_000_000}, "InvalidParameter.WebIdentityTokenError"),
        ({"exp": None}, "InvalidParameter.WebIdentityTokenError"),
        ({"sub": "repo:intruder/models:ref:refs/heads/main"}, "UnauthorizedOperation"),
    ],
    ids=["issuer", "audience", "expired", "issued-in-the-future", "not-yet-valid", "no-expiry", "subject"],
)
def test_a_token_that_does_not_hold_is_refused(
    emulator: EmulatorProcess, issuer: Issuer, role_arn: str, claims: dict[str, Any], code: str
) -> None:
    assert refused(emulator, issuer.token(emulator.admin.now(), **claims), role_arn) == code


def test_a_token_signed_by_another_key_or_garbled_is_refused(
    emulator: EmulatorProcess, issuer: Issuer, role_arn: str
) -> None:
    now = emulator.admin.now()
    impostor = Issuer(kid=issuer.kid)  # same issuer and kid, another key
    assert refused(emulator, impostor.token(now), role_arn) == "InvalidParameter.WebIdentityTokenError"
    assert refused(emulator, Issuer(kid="key-9").token(now), role_arn) == "InvalidParameter.WebIdentityTokenError"
    assert refused(emulator, "not-a-jwt", role_arn) == "InvalidParameter.WebIdentityTokenError"


def test_a_token_expires_on_the_cloud_clock(emulator: EmulatorProcess, issuer: Issuer, role_arn: str) -> None:
    token = issuer.token(emulator.admin.now(), lifetime=300)
    emulator.admin.advance(301)
    assert refused(emulator, token, role_arn) == "InvalidParameter.WebIdentityTokenError"


def test_unknown_provider_role_and_role_arn_are_refused(
    emulator: EmulatorProcess, issuer: Issuer, role_arn: str
) -> None:
    token = issuer.token(emulator.admin.now())
    assert refused(emulator, token, role_arn, ProviderId="gitlab") == "InvalidParameter.ParamError"
    other_role = role_arn.replace(ROLE_NAME, "nobody")
    assert refused(emulator, token, other_role) == "ResourceNotFound.RoleNotFound"
    assert refused(emulator, token, "cvmjob-ci") == "InvalidParameter.ParamError"


def test_a_role_trusts_its_own_issuer_only(emulator: EmulatorProcess, issuer: Issuer, role_arn: str) -> None:
    other = Issuer(url="https://gitlab.example.com", kid="gitlab-1")
    emulator.admin.add_oidc_provider("gitlab", other.url, [AUDIENCE], other.jwks())
    token = other.token(emulator.admin.now(), sub=SUBJECT)
    assert refused(emulator, token, role_arn, ProviderId="gitlab") == "UnauthorizedOperation"


def test_only_web_identity_may_skip_the_signature(emulator: EmulatorProcess, issuer: Issuer, role_arn: str) -> None:
    billing = CommonClient("billing", "2018-07-09", None, REGION, profile(emulator))
    with pytest.raises(TencentCloudSDKException) as err:
        billing.call_json("DescribeAccountBalance", {}, options={"SkipSign": True})
    assert err.value.code == "AuthFailure.SignatureFailure"
    assert "AssumeRoleWithWebIdentity" in str(err.value.message)
    with pytest.raises(TencentCloudSDKException) as err:
        unsigned_sts(emulator).call_json("GetFederationToken", {"Name": "x"}, options={"SkipSign": True})
    assert err.value.code == "AuthFailure.SignatureFailure"


def test_without_skip_or_a_signature_the_call_is_refused(
    emulator: EmulatorProcess, issuer: Issuer, role_arn: str
) -> None:
    body = {"ProviderId": PROVIDER_ID, "WebIdentityToken": issuer.token(emulator.admin.now()), "RoleArn": role_arn,
            "RoleSessionName": "ci"}
    headers = {"Content-Type": "application/json", "X-TC-Action": "AssumeRoleWithWebIdentity",
               "X-TC-Version": "2018-08-13"}
    answer = requests.post(f"http://{emulator.endpoint}/", json=body, headers=headers, timeout=10).json()
    assert answer["Response"]["Error"]["Code"] == "AuthFailure.SignatureFailure"
    skipped = requests.post(f"http://{emulator.endpoint}/", json=body, headers={**headers, "Authorization": "SKIP"},
                            timeout=10).json()
    assert "Credentials" in skipped["Response"]


def test_the_admin_api_refuses_a_provider_without_usable_keys(emulator: EmulatorProcess, issuer: Issuer) -> None:
    with pytest.raises(AdminError) as err:
        emulator.admin.add_oidc_provider(PROVIDER_ID, issuer.url, [AUDIENCE], {"keys": []})
    assert err.value.status == 400 and "JWKS" in err.value.detail
    with pytest.raises(AdminError) as err:
        emulator.admin.add_role(ROLE_NAME, {"statement": []}, issuer.url)
    assert err.value.status == 400


def test_providers_and_roles_are_kept_with_the_state(issuer: Issuer) -> None:
    kept = WebIdentity()
    kept.add_provider({"provider_id": PROVIDER_ID, "issuer": issuer.url, "client_ids": [AUDIENCE],
                       "jwks": issuer.jwks()})
    kept.add_role({"name": ROLE_NAME, "policy": {"statement": [{"effect": "allow", "action": "*"}]},
                   "issuer": issuer.url})
    restored = WebIdentity()
    restored.restore(kept.to_state())
    assert restored.to_state() == kept.to_state()
    now = time.time()
    assert restored.verify(PROVIDER_ID, issuer.token(now), now)["sub"] == SUBJECT
