"""The account's long-term key narrowed by a CAM policy, as a sub-account's key is (iam.py, admin ``cam/policy``):
API 3.0 answers AuthFailure.UnauthorizedOperation for what it denies, COS 403 AccessDenied, the other calls pass,
and the temporary keys it issues get no more than it has."""

from __future__ import annotations

from typing import Any

import pytest
from qcloud_cos import CosS3Client, CosServiceError
from tencentcloud.billing.v20180709 import billing_client
from tencentcloud.billing.v20180709 import models as billing_models
from tencentcloud.common import credential
from tencentcloud.common.exception.tencent_cloud_sdk_exception import TencentCloudSDKException
from tencentcloud.vpc.v20170312 import models as vpc_models

from orchestrator.emulator.client import AdminError
from tests.emulator.conftest import REGION, make_cos, profile
from tests.emulator.cvm_support import api_error, call
from tests.emulator.test_cos_auth import federation_token
from tests.emulator_process import EmulatorProcess


def everything_but(*actions: str) -> dict[str, Any]:
    return {"version": "2.0", "statement": [
        {"effect": "allow", "action": ["*"], "resource": ["*"]},
        {"effect": "deny", "action": list(actions), "resource": ["*"]},
    ]}


def create_group(vpc: Any, name: str) -> str:
    request = vpc_models.CreateSecurityGroupRequest()
    request.GroupName, request.GroupDescription = name, "cvmjob"
    return str(vpc.CreateSecurityGroup(request).SecurityGroup.SecurityGroupId)


def groups(vpc: Any) -> int:
    return int(vpc.DescribeSecurityGroups(vpc_models.DescribeSecurityGroupsRequest()).TotalCount)


def test_a_denied_api_action_is_refused_as_tencent_refuses_it(emulator: EmulatorProcess, vpc: Any, cvm: Any) -> None:
    policy = everything_but("name/vpc:CreateSecurityGroup")
    in_force = emulator.admin.set_account_policy(policy)
    assert in_force is not None and [(st["effect"], st["action"]) for st in in_force["statement"]] == [
        ("allow", ["*"]), ("deny", ["name/vpc:CreateSecurityGroup"])]
    with pytest.raises(TencentCloudSDKException) as err:
        create_group(vpc, "denied")
    assert err.value.code == "AuthFailure.UnauthorizedOperation"
    assert "you are not authorized to perform operation (vpc:CreateSecurityGroup)" in err.value.message
    assert groups(vpc) == 1  # the default group only; the other calls pass
    assert call(cvm, "DescribeInstances").TotalCount == 0
    assert emulator.admin.calls(service="vpc", action="CreateSecurityGroup")[-1]["error"] == (
        "AuthFailure.UnauthorizedOperation")

    assert emulator.admin.set_account_policy(None) is None  # the root account's rights again
    create_group(vpc, "allowed")
    assert groups(vpc) == 2


def test_a_denied_cos_operation_is_access_denied(emulator: EmulatorProcess, cos: CosS3Client, bucket: str) -> None:
    cos.put_object(Bucket=bucket, Key="before", Body=b"kept")
    emulator.admin.set_account_policy(everything_but("name/cos:PutObject"))
    with pytest.raises(CosServiceError) as err:
        cos.put_object(Bucket=bucket, Key="after", Body=b"refused")
    assert (err.value.get_status_code(), err.value.get_error_code()) == (403, "AccessDenied")
    assert cos.get_object(Bucket=bucket, Key="before")["Body"].get_raw_stream().read() == b"kept"
    assert [c["Key"] for c in cos.list_objects(Bucket=bucket)["Contents"]] == ["before"]


def test_temporary_keys_of_a_narrowed_key_get_the_intersection(
        emulator: EmulatorProcess, cos: CosS3Client, bucket: str, sts: Any) -> None:
    cos.put_object(Bucket=bucket, Key="data", Body=b"readable")
    emulator.admin.set_account_policy(everything_but("name/cos:PutObject", "name/billing:*"))
    session = {"version": "2.0", "statement": [{"effect": "allow", "action": ["name/cos:*"], "resource": ["*"]}]}
    creds = federation_token(sts, session)
    temporary = make_cos(emulator, creds.TmpSecretId, creds.TmpSecretKey, creds.Token)
    assert temporary.get_object(Bucket=bucket, Key="data")["Body"].get_raw_stream().read() == b"readable"
    with pytest.raises(CosServiceError) as err:
        temporary.put_object(Bucket=bucket, Key="data", Body=b"overwritten")
    assert err.value.get_status_code() == 403  # the session allows it, the key that issued it may not

    tmp = credential.Credential(creds.TmpSecretId, creds.TmpSecretKey, creds.Token)
    with api_error("AuthFailure.UnauthorizedOperation"):
        billing_client.BillingClient(tmp, REGION, profile(emulator)).DescribeAccountBalance(
            billing_models.DescribeAccountBalanceRequest())


def test_the_policy_is_a_cam_document_and_a_reset_forgets_it(emulator: EmulatorProcess, vpc: Any) -> None:
    not_policies: list[dict[str, Any]] = [
        {"policy": {"statement": []}}, {"policy": {"statement": [{"effect": "maybe"}]}}, {"policy": "*"}, {}]
    for bad in not_policies:
        with pytest.raises(AdminError) as refused:
            emulator.admin._call("PUT", "cam/policy", bad)
        assert refused.value.status == 400, bad
    emulator.admin.set_account_policy(everything_but("name/vpc:*"))
    assert emulator.admin._call("GET", "cam/policy")["policy"]["statement"][1]["action"] == ["name/vpc:*"]
    emulator.admin.reset()
    assert groups(vpc) == 1
