"""Run the agent the way production does, without the controller: inside an emulated instance started by
RunInstances, whose UserData writes agent.json and starts ``python3 -m orchestrator.agent`` (from this checkout,
instead of the wheel the real bootstrap unpacks). The agent then sees what it sees on Tencent Cloud: the
metadata service through the instance's proxy, its own "/" and the COS endpoint, with STS keys scoped to the job.
"""

from __future__ import annotations

import io
import tarfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from tencentcloud.cvm.v20170312 import cvm_client

from orchestrator.agent.manifest import read_manifest
from orchestrator.contract import AgentConfig, CosAccess, JobLayout, Location, Manifest, Result, TemporaryKeys
from orchestrator.providers.tencent import StaticCredential, TencentSdk
from orchestrator.providers.tencent.storage import ObjectStore
from orchestrator.providers.tencent.sts import Grant, federation_token
from orchestrator.spec.models import JobSpec
from tests.emulator.conftest import REGION, cred, profile
from tests.emulator.cvm_support import admin_instance, boot, run_one, user_data
from tests.emulator_process import EmulatorProcess

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = ROOT / "jobs" / "quickstart"
STATE_BUCKET = "cvmjob-1250000000"
DATA_BUCKET = "cvmjob-examples-1250000000"
DATA_PREFIX = "quickstart/"
# The quickstart at a tenth of its compute and checkpoint size: the tests are about the agent, not the model.
LIGHT = "--hidden 256 --batch-size 512"
# The quickstart with a floor on each step's duration, so that a test can act in the middle of a short run on any
# machine: ``python paced.py <seconds per step> <train.py arguments>``.
PACED = {"paced.py": """
import runpy, sys, time
from orchestrator import trainkit

report, seconds = trainkit.report, float(sys.argv.pop(1))
def paced(step, loss=None, **metrics):
    report(step, loss, **metrics)
    time.sleep(seconds)
trainkit.report = paced
sys.argv[0] = "train.py"
runpy.run_path("train.py", run_name="__main__")
"""}


def workdir_archive(extra: dict[str, str]) -> bytes:
    """The quickstart's script (its data comes through the sync) plus ``extra`` files."""
    files = {"train.py": (QUICKSTART / "train.py").read_bytes(), **{k: v.encode() for k, v in extra.items()}}
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


@dataclass
class AgentJob:
    emulator: EmulatorProcess
    cvm: Any
    sdk: TencentSdk
    job_id: str

    @property
    def layout(self) -> JobLayout:
        return JobLayout(self.job_id)

    @property
    def state(self) -> ObjectStore:
        return ObjectStore(self.sdk, STATE_BUCKET)

    def config(self, attempt: int, *, command: str, extra_files: dict[str, str] | None = None, node_rank: int = 0,
               nnodes: int = 1, **spec_overrides: Any) -> AgentConfig:
        spec = yaml.safe_load((QUICKSTART / "job.yaml").read_text())
        spec["train"]["command"] = command
        for section, values in spec_overrides.items():
            spec[section] = {**spec.get(section, {}), **values} if isinstance(values, dict) else values
        archive_key = f"{self.layout.bundle_prefix}workdir-{attempt}.tar.gz"
        self.state.put_bytes(archive_key, workdir_archive(extra_files or {}))
        keys = federation_token(self.sdk, "cvmjob-agent", self.emulator.appid, [
            Grant(STATE_BUCKET, self.layout.prefix, write=True), Grant(DATA_BUCKET, DATA_PREFIX, write=False)])
        return AgentConfig(
            job_id=self.job_id, job_name="quickstart", attempt=attempt, node_rank=node_rank, nnodes=nnodes,
            state=Location(bucket=STATE_BUCKET, prefix=self.layout.prefix),
            checkpoints=Location(bucket=STATE_BUCKET, prefix=self.layout.checkpoints_prefix),
            outputs=Location(bucket=STATE_BUCKET, prefix=self.layout.outputs_prefix),
            cos=CosAccess(region=REGION, endpoint=self.emulator.endpoint, appid=self.emulator.appid),
            keys=TemporaryKeys(secret_id=keys.secret_id, secret_key=keys.secret_key, token=keys.token,
                               expires_at=keys.expires_at),
            workdir_archive_key=archive_key,
            spec=JobSpec.model_validate(spec).model_dump(mode="json"),
            heartbeat_seconds=1.0, preemption_poll_seconds=1.0,
        )

    def launch(self, *configs: AgentConfig, spot: bool = False) -> str:
        """One instance that runs an agent for each config, one after the other, at its first boot and, as the
        real bootstrap arranges through cloud-init's per-boot scripts, at every later boot."""
        agents = ["#!/bin/bash"]
        for cfg in configs:
            home = f'"$TENCENTCLOUD_EMULATOR_ROOT/opt/cvmjob/{cfg.job_id}/a{cfg.attempt}-n{cfg.node_rank}"'
            agents += [f"mkdir -p {home}", f"cat > {home}/agent.json <<'CVMJOB_CONFIG'", cfg.model_dump_json(),
                       "CVMJOB_CONFIG",
                       f"(cd {home} && PYTHONPATH={ROOT} python3 -m orchestrator.agent --config {home}/agent.json "
                       f"--workdir {home} >> {home}/agent.log 2>&1)"]
        script = "\n".join([
            "#!/bin/bash",
            'agents="$TENCENTCLOUD_EMULATOR_ROOT/opt/cvmjob/agents.sh"',
            'mkdir -p "${agents%/*}"',
            "cat > \"$agents\" <<'CVMJOB_AGENTS'", *agents, "CVMJOB_AGENTS",
            'chmod +x "$agents"',
            'ln -s "$agents" "$TENCENTCLOUD_EMULATOR_ROOT/var/lib/cloud/scripts/per-boot/cvmjob-agents.sh"',
            'exec "$agents"',
        ]) + "\n"
        params: dict[str, Any] = {"UserData": user_data(script)}
        if spot:
            params.update(InstanceChargeType="SPOTPAID", InstanceType="GN7.2XLARGE32")
        instance_id = run_one(self.cvm, **params)
        boot(self.emulator, self.cvm, instance_id)
        return instance_id

    def home(self, instance_id: str, attempt: int, node: int = 0) -> Path:
        system = Path(admin_instance(self.emulator, instance_id)["system"])
        return system / "opt" / "cvmjob" / self.job_id / f"a{attempt}-n{node}"

    def status(self, attempt: int, node: int = 0) -> dict[str, Any] | None:
        doc: dict[str, Any] | None = self.state.get_json(self.layout.status(attempt, node))
        return doc

    def wait_result(self, instance_id: str, attempt: int, node: int = 0, timeout: float = 180.0) -> Result:
        deadline = time.monotonic() + timeout
        while self.state.head(self.layout.result(attempt, node)) is None:
            if time.monotonic() > deadline:
                home = self.home(instance_id, attempt, node)
                logs = [home / "agent.log", home.parents[3] / "var/log/cloud-init-output.log"]
                tails = "\n".join(f"--- {p}\n{p.read_text()[-3000:]}" for p in logs if p.exists())
                raise AssertionError(f"no result.json for attempt {attempt} within {timeout} s\n{tails}")
            time.sleep(0.3)
        return Result.model_validate(self.state.get_json(self.layout.result(attempt, node)))

    def manifest(self) -> Manifest:
        return read_manifest(self.state, self.layout.checkpoints_prefix).manifest

    def log(self, attempt: int, node: int = 0) -> str:
        chunks = sorted(o.key for o in self.state.iter_objects(self.layout.logs_prefix(attempt, node)))
        return "".join((self.state.get_bytes(k) or b"").decode() for k in chunks)


@pytest.fixture
def agent_job(emulator: EmulatorProcess, request: pytest.FixtureRequest) -> AgentJob:
    sdk = TencentSdk(StaticCredential(emulator.secret_id, emulator.secret_key), REGION, endpoint=emulator.endpoint,
                     appid=emulator.appid)
    for bucket in (STATE_BUCKET, DATA_BUCKET):
        ObjectStore(sdk, bucket).create_bucket()
    data = ObjectStore(sdk, DATA_BUCKET)
    for path in sorted((QUICKSTART / "dataset").iterdir()):
        data.upload_file(path, DATA_PREFIX + path.name)
    cvm = cvm_client.CvmClient(cred(emulator), REGION, profile(emulator))
    return AgentJob(emulator, cvm, sdk, job_id=f"job-{request.node.name[5:25].replace('_', '-')}")
