"""Tencent Container Registry's enterprise edition on the emulator (registry/enterprise.py, registry/api.py): an
instance bought through the admin API is a registry at <name>.tencentcloudcr.com; CreateInstanceToken, through the
official SDK, answers a login to it that the registry's token service takes for an hour, in its region only; an
instance without a public IP reaches it only from a VPC ManageInternalEndpoint linked to it."""

from __future__ import annotations

import json
from typing import Any

import pytest
import requests
from tencentcloud.common.exception.tencent_cloud_sdk_exception import TencentCloudSDKException
from tencentcloud.tcr.v20190924 import models

from tests.emulator.conftest import REGION
from tests.emulator.cvm_support import admin_instance, boot, describe, run_one
from tests.emulator_process import EmulatorProcess


def token(tcr: Any, registry_id: str, **params: str) -> Any:
    request = models.CreateInstanceTokenRequest()
    request.from_json_string(json.dumps({"RegistryId": registry_id, **params}))
    return tcr.CreateInstanceToken(request)


def login(emulator: EmulatorProcess, domain: str, username: str, password: str) -> int:
    """The token service's answer to a login, as `docker login` asks it."""
    answer = requests.get(f"http://{domain}/service/token", params={"service": domain, "scope":
                          "repository:team/train:pull"}, auth=(username, password),
                          proxies={"http": f"http://{emulator.endpoint}"}, timeout=10)
    return answer.status_code


def test_a_temporary_token_logs_in_to_its_instance_for_an_hour(emulator: EmulatorProcess, tcr: Any) -> None:
    instance = emulator.admin.add_tcr_instance("team-registry")
    assert instance["domain"] == "team-registry.tencentcloudcr.com" and instance["registry_id"].startswith("tcr-")
    issued = token(tcr, instance["registry_id"])
    now = emulator.admin.now()
    assert 3590 <= issued.ExpTime - now <= 3600 and issued.TokenId is None
    assert login(emulator, instance["domain"], issued.Username, issued.Token) == 200
    assert login(emulator, instance["domain"], issued.Username, issued.Token + "x") == 401
    other = emulator.admin.add_tcr_instance("other-registry")
    assert login(emulator, other["domain"], issued.Username, issued.Token) == 401  # another instance's
    emulator.admin.advance(3601)
    assert login(emulator, instance["domain"], issued.Username, issued.Token) == 401  # expired


def test_an_unknown_instance_or_one_of_another_region_is_not_found(emulator: EmulatorProcess, tcr: Any) -> None:
    elsewhere = emulator.admin.add_tcr_instance("shanghai-team", region="ap-shanghai")
    for registry_id in ("tcr-00000000", elsewhere["registry_id"]):
        with pytest.raises(TencentCloudSDKException) as caught:
            token(tcr, registry_id)
        assert caught.value.code == "ResourceNotFound" and REGION in caught.value.message
    with pytest.raises(TencentCloudSDKException) as caught:
        token(tcr, elsewhere["registry_id"], TokenType="forever")
    assert caught.value.code == "InvalidParameterValue"


def test_a_domain_no_instance_has_does_not_resolve(emulator: EmulatorProcess) -> None:
    answer = requests.get("http://nobody.tencentcloudcr.com/v2/", proxies={"http": f"http://{emulator.endpoint}"},
                          timeout=10)
    assert answer.status_code == 502 and "does not resolve" in answer.text


def test_instance_names_follow_the_consoles_rule(emulator: EmulatorProcess) -> None:
    emulator.admin.add_tcr_instance("team-a")
    for name in ("team-a", "ab", "Team-B", "-team", "team-"):
        with pytest.raises(Exception, match="instance"):
            emulator.admin.add_tcr_instance(name)


def call(tcr: Any, action: str, **params: str) -> Any:
    request = getattr(models, f"{action}Request")()
    request.from_json_string(json.dumps(params))
    return getattr(tcr, action)(request)


def test_an_instance_without_a_public_ip_reaches_an_enterprise_registry_only_from_a_linked_vpc(
        emulator: EmulatorProcess, cvm: Any, tcr: Any) -> None:
    registry = emulator.admin.add_tcr_instance("team-registry")
    instance_id = run_one(cvm)
    boot(emulator, cvm, instance_id)
    record = admin_instance(emulator, instance_id)
    [described] = describe(cvm, instance_id)
    vpc_id, subnet_id = described.VirtualPrivateCloud.VpcId, described.VirtualPrivateCloud.SubnetId

    def status() -> int:  # GET /v2/ through the instance's own proxy, as its Podman would
        answer = requests.get(f"http://{registry['domain']}/v2/", proxies={"http": record["proxy"]}, timeout=10)
        return answer.status_code

    assert status() == 502  # no link: the domain is the public one, which the instance does not reach
    assert requests.get("http://ccr.ccs.tencentyun.com/v2/", proxies={"http": record["proxy"]},
                        timeout=10).status_code == 401  # the personal edition is reachable from any VPC
    assert call(tcr, "DescribeInternalEndpoints", RegistryId=registry["registry_id"]).TotalCount == 0
    with pytest.raises(TencentCloudSDKException) as caught:
        call(tcr, "ManageInternalEndpoint", RegistryId=registry["registry_id"], Operation="Create",
             VpcId=vpc_id, SubnetId="subnet-00000000")
    assert caught.value.code == "InvalidParameter"
    call(tcr, "ManageInternalEndpoint", RegistryId=registry["registry_id"], Operation="Create",
         VpcId=vpc_id, SubnetId=subnet_id)
    [access] = call(tcr, "DescribeInternalEndpoints", RegistryId=registry["registry_id"]).AccessVpcSet
    assert (access.VpcId, access.Status) == (vpc_id, "Running")
    assert status() == 401  # reached: the registry asks for a login
    call(tcr, "ManageInternalEndpoint", RegistryId=registry["registry_id"], Operation="Delete",
         VpcId=vpc_id, SubnetId=subnet_id)
    assert status() == 502
