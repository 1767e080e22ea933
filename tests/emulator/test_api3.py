"""The API 3.0 protocol through the official SDKs: signatures, tokens, envelopes, routing."""

from __future__ import annotations

import json
import time
from typing import Any
from unittest import mock

import pytest
import requests
from tencentcloud.billing.v20180709 import billing_client
from tencentcloud.billing.v20180709 import models as billing_models
from tencentcloud.common import credential
from tencentcloud.common.common_client import CommonClient
from tencentcloud.common.exception.tencent_cloud_sdk_exception import TencentCloudSDKException
from tencentcloud.common.profile.client_profile import ClientProfile
from tencentcloud.common.profile.http_profile import HttpProfile
from tencentcloud.sts.v20180813 import models as sts_models

from tests.emulator.conftest import REGION, cred, profile
from tests.emulator_process import EmulatorProcess


def balance_request() -> billing_models.DescribeAccountBalanceRequest:
    return billing_models.DescribeAccountBalanceRequest()


def test_good_signature_is_accepted(billing: Any) -> None:
    resp = billing.DescribeAccountBalance(balance_request())
    assert resp.RequestId
    assert resp.Balance == 10_000_000


def test_wrong_secret_key_is_rejected(emulator: EmulatorProcess) -> None:
    client = billing_client.BillingClient(
        credential.Credential(emulator.secret_id, "not-the-key"), REGION, profile(emulator)
    )
    with pytest.raises(TencentCloudSDKException) as err:
        client.DescribeAccountBalance(balance_request())
    assert err.value.code == "AuthFailure.SignatureFailure"
    assert err.value.requestId


def test_unknown_secret_id_is_rejected(emulator: EmulatorProcess) -> None:
    client = billing_client.BillingClient(
        credential.Credential("AKIDunknown000000000000000000000000", emulator.secret_key), REGION, profile(emulator)
    )
    with pytest.raises(TencentCloudSDKException) as err:
        client.DescribeAccountBalance(balance_request())
    assert err.value.code == "AuthFailure.SecretIdNotFound"


def test_expired_timestamp_is_rejected(billing: Any) -> None:
    stale = time.time() - 600
    with (
        mock.patch("tencentcloud.common.abstract_client.time.time", return_value=stale),
        pytest.raises(TencentCloudSDKException) as err,
    ):
        billing.DescribeAccountBalance(balance_request())
    assert err.value.code == "AuthFailure.SignatureExpire"


def test_tampered_body_is_rejected(billing: Any) -> None:
    real_request = requests.Session.request

    def tamper(self: requests.Session, method: str, url: str, **kwargs: Any) -> requests.Response:
        kwargs["data"] = (
            kwargs["data"].replace(b"{}", b'{"TempCredit": true}')
            if isinstance(kwargs.get("data"), bytes)
            else '{"TempCredit": true}'
        )
        return real_request(self, method, url, **kwargs)

    with mock.patch.object(requests.Session, "request", tamper), pytest.raises(TencentCloudSDKException) as err:
        billing.DescribeAccountBalance(balance_request())
    assert err.value.code == "AuthFailure.SignatureFailure"


def test_get_form_requests_are_signed_and_answered(emulator: EmulatorProcess) -> None:
    http = HttpProfile(protocol="http", endpoint=emulator.endpoint, reqMethod="GET")
    client = CommonClient("vpc", "2017-03-12", cred(emulator), REGION, ClientProfile(httpProfile=http))
    resp = client.call_json(
        "DescribeSubnets", {"Filters": [{"Name": "zone", "Values": ["ap-guangzhou-3"]}], "Limit": "5"}
    )
    subnets = resp["Response"]["SubnetSet"]
    assert [s["Zone"] for s in subnets] == ["ap-guangzhou-3"]


def test_literal_http_host_is_accepted(emulator: EmulatorProcess) -> None:
    """tccli and STSAssumeRoleCredential sign `Host: http://127.0.0.1:PORT` (client-recipes §2.1)."""
    http = HttpProfile(endpoint=f"http://{emulator.endpoint}")
    client = CommonClient("billing", "2018-07-09", cred(emulator), REGION, ClientProfile(httpProfile=http))
    assert client.call_json("DescribeAccountBalance", {})["Response"]["Balance"] == 10_000_000


def test_errors_are_http_200_exact_json_with_request_id(emulator: EmulatorProcess) -> None:
    resp = requests.post(
        f"http://{emulator.endpoint}/",
        data=b"{}",
        headers={
            "Content-Type": "application/json",
            "X-TC-Action": "DescribeAccountBalance",
            "X-TC-Version": "2018-07-09",
        },
        timeout=10,
    )
    assert resp.status_code == 200
    assert resp.headers["Content-Type"] == "application/json"
    body = resp.json()["Response"]
    assert body["Error"]["Code"] == "AuthFailure.SignatureFailure"
    assert body["RequestId"]


def test_unknown_action_and_version(emulator: EmulatorProcess) -> None:
    client = CommonClient("billing", "2018-07-09", cred(emulator), REGION, profile(emulator))
    with pytest.raises(TencentCloudSDKException) as err:
        client.call_json("DescribeNothing", {})
    assert err.value.code == "InvalidAction"
    old = CommonClient("billing", "2017-01-01", cred(emulator), REGION, profile(emulator))
    with pytest.raises(TencentCloudSDKException) as err:
        old.call_json("DescribeAccountBalance", {})
    assert err.value.code == "NoSuchVersion"


def federation_token(sts: Any, policy: dict[str, Any] | None = None, seconds: int = 600) -> Any:
    req = sts_models.GetFederationTokenRequest()
    params: dict[str, Any] = {"Name": "cvmjob", "DurationSeconds": seconds}
    if policy is not None:
        from urllib.parse import quote

        params["Policy"] = quote(json.dumps(policy))
    req.from_json_string(json.dumps(params))
    return sts.GetFederationToken(req)


def test_temporary_credentials_need_their_token(emulator: EmulatorProcess, sts: Any) -> None:
    token = federation_token(sts)
    good = credential.Credential(token.Credentials.TmpSecretId, token.Credentials.TmpSecretKey, token.Credentials.Token)
    client = billing_client.BillingClient(good, REGION, profile(emulator))
    assert client.DescribeAccountBalance(balance_request()).Balance == 10_000_000
    forged = credential.Credential(token.Credentials.TmpSecretId, token.Credentials.TmpSecretKey, "forged")
    with pytest.raises(TencentCloudSDKException) as err:
        billing_client.BillingClient(forged, REGION, profile(emulator)).DescribeAccountBalance(balance_request())
    assert err.value.code == "AuthFailure.TokenFailure"


def test_temporary_credentials_expire_on_the_cloud_clock(emulator: EmulatorProcess, sts: Any) -> None:
    token = federation_token(sts, seconds=600)
    assert abs(token.ExpiredTime - (emulator.admin.now() + 600)) < 5
    emulator.admin.advance(601)
    tmp = credential.Credential(token.Credentials.TmpSecretId, token.Credentials.TmpSecretKey, token.Credentials.Token)
    with pytest.raises(TencentCloudSDKException) as err:
        billing_client.BillingClient(tmp, REGION, profile(emulator)).DescribeAccountBalance(balance_request())
    assert err.value.code == "AuthFailure.TokenFailure"


def test_a_reset_opens_the_new_account_on_the_wall_clock(emulator: EmulatorProcess) -> None:
    # A client sets ActionTime from its own clock: a cloud still minutes ahead after a reset refuses it.
    assert emulator.admin.advance(3600) > time.time() + 3500
    emulator.admin.reset()
    assert abs(emulator.admin.now() - time.time()) < 5


def test_session_policy_limits_api_actions(emulator: EmulatorProcess, sts: Any) -> None:
    policy = {"version": "2.0", "statement": [{"effect": "allow", "action": ["name/cos:GetObject"], "resource": ["*"]}]}
    token = federation_token(sts, policy)
    tmp = credential.Credential(token.Credentials.TmpSecretId, token.Credentials.TmpSecretKey, token.Credentials.Token)
    with pytest.raises(TencentCloudSDKException) as err:
        billing_client.BillingClient(tmp, REGION, profile(emulator)).DescribeAccountBalance(balance_request())
    assert err.value.code == "AuthFailure.UnauthorizedOperation"


def test_federation_token_needs_permanent_keys(emulator: EmulatorProcess, sts: Any) -> None:
    from tencentcloud.sts.v20180813 import sts_client

    token = federation_token(sts)
    tmp = credential.Credential(token.Credentials.TmpSecretId, token.Credentials.TmpSecretKey, token.Credentials.Token)
    with pytest.raises(TencentCloudSDKException) as err:
        federation_token(sts_client.StsClient(tmp, REGION, profile(emulator)))
    assert err.value.code == "FailedOperation.TempKeyNotAllowed"


def test_assume_role_credential_chain(emulator: EmulatorProcess) -> None:
    """The SDK's STSAssumeRoleCredential: AssumeRole with the long key, then calls with the temporary one."""
    chain = credential.STSAssumeRoleCredential(
        emulator.secret_id,
        emulator.secret_key,
        "qcs::cam::uin/100000000001:roleName/cvmjob-trainer",
        "session",
        endpoint=f"http://{emulator.endpoint}",
    )
    client = billing_client.BillingClient(chain, REGION, profile(emulator))
    assert client.DescribeAccountBalance(balance_request()).Balance == 10_000_000
    actions = [c["action"] for c in emulator.admin.calls(service="sts")]
    assert actions == ["AssumeRole"]


def test_injected_error_and_rate_limit(emulator: EmulatorProcess, billing: Any) -> None:
    emulator.admin.inject("error", service="billing", action="DescribeAccountBalance", code="InternalError", count=1)
    with pytest.raises(TencentCloudSDKException) as err:
        billing.DescribeAccountBalance(balance_request())
    assert err.value.code == "InternalError"
    assert billing.DescribeAccountBalance(balance_request()).Balance == 10_000_000
    emulator.admin.set_rate_limit("billing:DescribeAccountBalance", 2)
    codes = []
    for _ in range(6):
        try:
            billing.DescribeAccountBalance(balance_request())
            codes.append("ok")
        except TencentCloudSDKException as exc:
            codes.append(exc.code)
    assert "RequestLimitExceeded" in codes
    assert codes[0] == "ok"


def test_drop_response_commits_then_resets(emulator: EmulatorProcess, sts: Any) -> None:
    emulator.admin.inject("drop_response", service="sts", action="GetFederationToken")
    with pytest.raises(TencentCloudSDKException) as err:
        federation_token(sts)
    assert err.value.code == "ClientNetworkError"
    calls = emulator.admin.calls(service="sts", action="GetFederationToken")
    assert calls[-1]["dropped"] is True and calls[-1]["error"] is None
