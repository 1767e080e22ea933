"""Security: hostile specs and inputs get one clear error, never a traceback; bad or expired credentials fail
cleanly with nothing created (exit 3); the agent's short-lived keys reach only its own job's prefixes. (No
long-term secret in UserData, COS, logs or the state store is checked after every fault scenario: the
``secret`` invariant.)"""

from __future__ import annotations

import copy
import io
import json
import shutil
from collections.abc import Callable
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from qcloud_cos.cos_exception import CosServiceError
from tencentcloud.common import credential
from tencentcloud.common.exception.tencent_cloud_sdk_exception import TencentCloudSDKException
from tencentcloud.cvm.v20170312 import cvm_client
from tencentcloud.cvm.v20170312 import models as cvm_models
from tencentcloud.sts.v20180813 import models as sts_models
from tencentcloud.sts.v20180813 import sts_client

from orchestrator.cli.main import main
from orchestrator.contract import JobLayout
from tests.emulator.conftest import make_cos, profile
from tests.emulator_process import EmulatorProcess
from tests.faults.conftest import expect_scenario
from tests.faults.harness import JOB, REGION, STATE_BUCKET, Pool, Record, World, names, scenario

GROUP = "security"
BASE = yaml.safe_load(JOB.read_text())
HOSTILE = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=40),
    st.sampled_from(["../../etc/passwd", "/etc/shadow", "$(rm -rf /)", "`id`", "a\nb", "\x00", "cos://../x/",
                     "🙂" * 30, "x" * 5000, "1e999", "-1", "0", "999999999999", "ap-guangzhou-99", "img-00000000",
                     "S5.MEDIUM4\n", "spot; reboot", "{name}" * 20, "cos://cvmjob-1250000000/cvmjob/", "role:../../x"]),
)
VALUES = st.recursive(HOSTILE, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
    st.text(max_size=10) | st.sampled_from(["name", "type", "command", "source", "target", "mode", "dir"]), inner,
    max_size=3), max_leaves=6)


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix] if prefix else []
    if isinstance(node, dict):
        for key, child in node.items():
            found += _paths(child, (*prefix, key))
    return found


EXTRA = [("data",), ("setup",), ("zones",), ("image",), ("credentials",), ("storage", "bucket"), ("tags",),
         ("disks", "system", "size_gib"), ("billing", "mode"), ("train", "nnodes"), ("train", "env"),
         ("limits", "max_cost"), ("workdir",), ("checkpoints", "upload_to"), ("policies", "recovery")]
PATHS = _paths(BASE) + EXTRA


def cli(argv: list[str]) -> tuple[int, str, str]:
    """The CLI's main() in this process, as a shell would run it: its exit code, stdout and stderr."""
    out, err = io.StringIO(), io.StringIO()
    code: int | str | None = 0
    with redirect_stdout(out), redirect_stderr(err):
        try:
            main(argv)
        except SystemExit as exc:
            code = exc.code
    return (code if isinstance(code, int) else 1), out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def job_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the fault job's folder (tiny.py, policies): hostile specs are written next to it."""
    folder = tmp_path_factory.mktemp("hostile") / "job"
    shutil.copytree(JOB.parent, folder)
    return folder


@pytest.fixture
def cli_env(emulator: EmulatorProcess, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> EmulatorProcess:
    monkeypatch.setenv("CVMJOB_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("CVMJOB_ENDPOINT", emulator.endpoint)
    monkeypatch.setenv("TENCENTCLOUD_SECRET_ID", emulator.secret_id)
    monkeypatch.setenv("TENCENTCLOUD_SECRET_KEY", emulator.secret_key)
    return emulator


@settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(changes=st.lists(st.tuples(st.sampled_from(PATHS), VALUES, st.booleans()), min_size=1, max_size=3),
       command=st.sampled_from(["plan", "run"]))
def test_hostile_specs_get_one_clear_error(cli_env: EmulatorProcess, job_dir: Path, record: Record,
                                           changes: list[tuple[tuple[Any, ...], Any, bool]], command: str) -> None:
    """Random hostile values anywhere in a valid spec, through `cvmjob plan` or `cvmjob run`: exit 0 (a valid
    plan), 2 (bad input: one `error:` line per problem) or 3 (the cloud refused, one line); never a traceback, and
    a rejected `run` creates nothing."""
    document = copy.deepcopy(BASE)
    for path, value, delete in changes:
        node: Any = document
        for part in path[:-1]:
            node = node.setdefault(part, {}) if isinstance(node, dict) else {}
        if isinstance(node, dict):
            if delete:
                node.pop(path[-1], None)
            else:
                node[path[-1]] = value
    spec = job_dir / "job.yaml"
    spec.write_text(yaml.safe_dump(document, allow_unicode=True), encoding="utf-8")
    # `run` always gets one sure mistake too: a rejected run must create nothing
    code, out, err = cli([command, str(spec)] + (["--set", "train.nnodes=0"] if command == "run" else []))
    assert "Traceback" not in out + err and code in (0, 2, 3), (code, err[-2000:])
    if code != 0:
        lines = err.strip().splitlines()
        assert lines and all(line.startswith("error: ") for line in lines), err
        assert code == 2 or len(lines) == 1, err
    if command == "run":
        assert code == 2, err
        assert cli_env.admin.instances() == []
    record.injected = ["60 hypothesis examples of hostile values (paths, shell, unicode, huge, NaN, nested) in a "
                       "valid spec, through `cvmjob plan` and `cvmjob run`"]
    record.checked = ["exit 0/2/3", "one `error:` line per problem", "no traceback", "nothing created"]


@pytest.mark.parametrize("name", ["deep", "bomb", "binary", "duplicate", "python-tag", "list", "empty"])
def test_hostile_files_get_one_clear_error(cli_env: EmulatorProcess, tmp_path: Path, record: Record,
                                           name: str) -> None:
    """Files no YAML spec should be: nested 5000 deep, an alias bomb, binary, duplicate keys, a python tag, a
    list, empty: exit 2 with `error:` lines, no traceback, nothing created."""
    aliases = ['a0: &a0 ["x","x","x","x","x","x","x","x","x","x"]'] + [
        f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, 9)]
    texts: dict[str, bytes] = {
        "deep": ("name: " + "[" * 5000 + "]" * 5000 + "\n").encode(),
        "bomb": ("\n".join(aliases) + "\nname: bomb\nregion: ap-guangzhou\ninstance: {type: S5.MEDIUM4}\n"
                 "train: {command: python x.py}\nsetup: *a8\n").encode(),
        "binary": bytes(range(256)) * 4,
        "duplicate": b"name: a\nname: b\n",
        "python-tag": b"name: !!python/object/apply:os.system ['echo pwned']\n",
        "list": b"- a\n- b\n",
        "empty": b"",
    }
    path = tmp_path / "job.yaml"
    path.write_bytes(texts[name])
    code, out, err = cli(["run", str(path)])
    assert code == 2 and "Traceback" not in out + err, (code, err[-2000:])
    assert all(line.startswith("error: ") for line in err.strip().splitlines()), err
    assert cli_env.admin.instances() == []
    record.injected = [f"a {name} spec file"]
    record.checked = ["exit 2", "`error:` lines", "no traceback", "nothing created"]


# -- credentials ---------------------------------------------------------------------------------------------------
@scenario("bad-credentials-create-nothing", GROUP, cost=12, checks=("I1", "I2", "secret"))
def bad_credentials(w: World) -> None:
    """A wrong SecretKey, an unknown SecretId, and expired temporary credentials (STS token expired by the
    cloud): `cvmjob run` exits 3 with one `error:` line each, and nothing is created."""
    client = sts_client.StsClient(credential.Credential(w.emulator.secret_id, w.emulator.secret_key), REGION,
                                  profile(w.emulator))
    request = sts_models.GetFederationTokenRequest()
    policy = {"version": "2.0", "statement": [{"effect": "allow", "action": ["*"], "resource": ["*"]}]}
    request._deserialize({"Name": "expiring", "Policy": json.dumps(policy), "DurationSeconds": 1800})
    token = client.GetFederationToken(request).Credentials
    w.admin.expire_credentials()
    cases = {
        "wrong SecretKey": {"TENCENTCLOUD_SECRET_KEY": "not-the-key-" + "x" * 20},
        "unknown SecretId": {"TENCENTCLOUD_SECRET_ID": "AKID" + "0" * 32},
        "expired STS token": {"TENCENTCLOUD_SECRET_ID": token.TmpSecretId,
                              "TENCENTCLOUD_SECRET_KEY": token.TmpSecretKey,
                              "TENCENTCLOUD_SESSION_TOKEN": token.Token},
    }
    for case, env in cases.items():
        w.note(case)
        result = w.cli("run", str(JOB), **env)
        lines = result.stderr.strip().splitlines()
        assert result.returncode == 3, (case, result.returncode, result.stderr[-1500:])
        assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in result.stderr, lines
    assert w.admin.calls(action="RunInstances") == [] and w.admin.instances() == []
    assert w.jobs() == []
    assert w.keys("cvmjob/") == []


@scenario("sts-keys-scoped-to-the-job", GROUP, cost=25)
def sts_scoped(w: World) -> None:
    """The agent's short-lived keys (the job's credentials.json) read and write the job's own prefix, and get
    AccessDenied on another job's prefix, on listing other jobs, on another bucket, and on the CVM API."""
    other = "cvmjob/job-0therjob/"
    root = w.cos()
    root.create_bucket(Bucket="cvmjob-other-1250000000")
    job_id = w.submit("train.command=exec python3 tiny.py --steps 400 --step-seconds 0.1 --every 10")
    process = w.resume(job_id)
    w.wait_phase(job_id, "training", min_step=2)
    root.put_object(Bucket=STATE_BUCKET, Key=other + "spec.json", Body=b"{}")
    layout = JobLayout(job_id)
    keys = json.loads(w.get_object(layout.credentials(1)) or b"{}")["keys"]
    agent = make_cos(w.emulator, keys["secret_id"], keys["secret_key"], keys["token"])
    assert agent.get_object(Bucket=STATE_BUCKET, Key=layout.spec)["Body"].get_raw_stream().read()
    agent.put_object(Bucket=STATE_BUCKET, Key=layout.prefix + "outputs/probe.txt", Body=b"mine")
    denied: dict[str, Callable[[], object]] = {
        "read another job": lambda: agent.get_object(Bucket=STATE_BUCKET, Key=other + "spec.json"),
        "write another job": lambda: agent.put_object(Bucket=STATE_BUCKET, Key=other + "x", Body=b"x"),
        "delete another job": lambda: agent.delete_object(Bucket=STATE_BUCKET, Key=other + "spec.json"),
        "list every job": lambda: agent.list_objects(Bucket=STATE_BUCKET, Prefix="cvmjob/"),
        "another bucket": lambda: agent.put_object(Bucket="cvmjob-other-1250000000", Key="x", Body=b"x"),
    }
    for what, call in denied.items():
        with pytest.raises(CosServiceError) as info:
            call()
        assert info.value.get_error_code() == "AccessDenied", (what, info.value.get_error_code())
    w.note("the agent's STS keys tried on " + ", ".join(denied))
    cvm = cvm_client.CvmClient(credential.Credential(keys["secret_id"], keys["secret_key"], keys["token"]), REGION,
                               profile(w.emulator))
    with pytest.raises(TencentCloudSDKException) as api:
        cvm.DescribeInstances(cvm_models.DescribeInstancesRequest())
    assert "Unauthorized" in (api.value.get_code() or ""), api.value.get_code()
    assert root.get_object(Bucket=STATE_BUCKET, Key=other + "spec.json")["Body"].get_raw_stream().read() == b"{}"
    w.cli("cancel", job_id)
    assert process.wait(120) == 130
    root.delete_object(Bucket=STATE_BUCKET, Key=other + "spec.json")


@pytest.mark.parametrize("scenario_name", names(GROUP))
def test_security_on_the_emulator(scenario_name: str, fault_pool: Pool, record: Record) -> None:
    expect_scenario(fault_pool, scenario_name, record)

