"""docs/cam/ stays true: the controller's policy allows exactly the API actions the provider calls (each one a call
in providers/tencent/, found in its source), COS on the state buckets for every COS operation it sends, and the
instance role the COS actions the agents' own keys are issued with (sts.py)."""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

import pytest

from orchestrator.emulator.iam import Policy
from orchestrator.providers.tencent import probes, sts
from orchestrator.providers.tencent._sdk import _PRODUCTS, _product

ROOT = Path(__file__).parents[4]
CAM = ROOT / "docs" / "cam"
PROVIDER = ROOT / "orchestrator" / "providers" / "tencent"
# Actions named in the provider's source that are not calls: the API budget's table of published rate limits.
NOT_CALLS = {"budget.py"}
# Allowed without a call of their own: RunInstances with CamRoleName binds the instance role (cam:PassRole).
JUSTIFIED = {"cam:PassRole"}
UNSIGNED = {"sts:AssumeRoleWithWebIdentity"}  # needs the role's trust policy (ci-role-trust.json), no permission
# cos-python-sdk-v5's methods, by the COS operation (CAM action) each sends.
COS_OPERATIONS = {"abort_multipart_upload": "AbortMultipartUpload", "complete_multipart_upload":
                  "CompleteMultipartUpload", "create_bucket": "PutBucket", "create_multipart_upload":
                  "InitiateMultipartUpload", "delete_objects": "DeleteObject", "get_object": "GetObject",
                  "head_bucket": "HeadBucket", "head_object": "HeadObject", "list_buckets": "GetService",
                  "list_objects": "GetBucket", "put_object": "PutObject"}
# Sent without the SDK's methods (_sdk.py cos_get/cos_put, many.py): ranged GETs, streamed PUTs and parts.
RAW_OPERATIONS = {"GetObject", "PutObject", "UploadPart", "HeadObject"}
VALUES = {"<APPID>": "1250000000", "<REGION>": "ap-shanghai", "<UIN>": "100000000001", "<DATA_BUCKET>":
          "data-1250000000", "<OUTPUT_BUCKET>": "out-1250000000", "<INSTANCE_ROLE>": "cvmjob-instance"}


def document(name: str) -> dict[str, Any]:
    text = (CAM / name).read_text()
    for placeholder, value in VALUES.items():
        text = text.replace(placeholder, value)
    loaded: dict[str, Any] = json.loads(text)
    return loaded


def _sources() -> list[ast.AST]:
    return [ast.parse(path.read_text()) for path in sorted(PROVIDER.glob("*.py")) if path.name not in NOT_CALLS]


def called_api_actions() -> set[str]:
    """``service:Action`` for every string in the provider's source that names an action of a product's client
    that the module names (the products share action names: TCR has a DescribeInstances too)."""
    clients = {service: _product(service)[0] for service in _PRODUCTS}
    found = set()
    for tree in _sources():
        strings = {node.value for node in ast.walk(tree) if isinstance(node, ast.Constant)
                   and isinstance(node.value, str)}
        named = {s: c for s, c in clients.items() if s in strings}
        for value in strings:
            if value.isalnum():
                found |= {f"{s}:{value}" for s, c in named.items() if callable(getattr(c, value, None))}
    return found


def called_cos_methods() -> set[str]:
    return {node.args[0].value for tree in _sources() for node in ast.walk(tree)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "cos_call"
            and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)}


def api_actions(policy: dict[str, Any]) -> set[str]:
    return {action.removeprefix("name/") for st in policy["statement"] for action in st["action"]
            if not action.startswith("name/cos:")}


def test_every_document_is_a_policy_cam_reads() -> None:
    for path in sorted(CAM.glob("*.json")):
        loaded = document(path.name)
        assert loaded["version"] == "2.0", path.name
        Policy.parse(loaded)


def test_the_controller_policy_allows_exactly_the_api_actions_the_provider_calls() -> None:
    called = called_api_actions()
    assert {"cvm:RunInstances", "vpc:DescribeVpcs", "cvm:DescribeAccountQuota"} <= called  # the scan finds them
    assert api_actions(document("controller.json")) == called - UNSIGNED | JUSTIFIED


def test_the_controller_policy_allows_every_cos_operation_on_every_regions_state_bucket() -> None:
    methods = called_cos_methods()
    assert methods <= set(COS_OPERATIONS), f"map {sorted(methods - set(COS_OPERATIONS))} to their COS operations"
    policy = Policy.parse(document("controller.json"))
    for operation in {COS_OPERATIONS[m] for m in methods} | RAW_OPERATIONS:
        for region in ("ap-guangzhou", "ap-shanghai"):
            bucket = f"cvmjob-{region}-1250000000"
            assert policy.allows(f"name/cos:{operation}", f"qcs::cos:{region}:uid/1250000000:{bucket}/cvmjob/x"), \
                operation
    assert policy.allows("name/cos:GetObject", "qcs::cos:ap-shanghai:uid/1250000000:data-1250000000/train/x")
    assert not policy.allows("name/cos:PutObject", "qcs::cos:ap-shanghai:uid/1250000000:data-1250000000/train/x")


def test_the_instance_role_allows_what_the_agents_own_keys_are_issued_with() -> None:
    issued = sts.cos_policy("ap-shanghai", "1250000000", [sts.Grant("cvmjob-ap-shanghai-1250000000", "cvmjob/", True),
                                                          sts.Grant("data-1250000000", "train/", False)])
    role = document("instance-role.json")
    actions = {a for st in role["statement"] for a in st["action"]}
    assert actions == {a for st in issued["statement"] for a in st["action"]}  # type: ignore[attr-defined]
    policy = Policy.parse(role)
    state = "qcs::cos:ap-shanghai:uid/1250000000:cvmjob-ap-shanghai-1250000000/cvmjob/job-1/x"
    assert all(policy.allows(a, state) for a in sts.OBJECT_ACTIONS)
    assert all(policy.allows(a, "qcs::cos:ap-shanghai:uid/1250000000:data-1250000000/<DATA_PREFIX>x")
               for a in sts.READ_ACTIONS)
    assert not {a for a in actions if not a.startswith("name/cos:")}  # the agent calls nothing but COS


@pytest.mark.parametrize("name", ["ci-role-trust.json"])
def test_the_ci_role_trusts_one_repositorys_github_tokens_only(name: str) -> None:
    [statement] = document(name)["statement"]
    assert statement["action"] == ["name/sts:AssumeRoleWithWebIdentity"]
    assert set(statement["condition"]["string_equal"]) == {"oidc:iss", "oidc:aud", "oidc:sub"}


def test_doctor_probes_every_action_of_the_controller_policy() -> None:
    probed = set(probes.PROBES) | set(probes.UNASKED)
    assert {a for a in probed if not a.startswith("cos:")} == api_actions(document("controller.json"))
    assert Policy.parse(document("controller.json")).allows("name/cos:GetService", "*")
