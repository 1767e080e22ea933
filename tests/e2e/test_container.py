"""Bring your own container (issue 32), through the CLI: the image is pushed to the emulator's registry, and every
node logs in, pulls it, and trains inside it (2-process DDP). A spot reclaim with notice is checkpointed from inside
the container and resumed in a new container on a new instance, with the losses of the same training run through
without a stop; the login there is a TCR enterprise instance's temporary token, which the controller issues. A
wrong image, a refused login (the personal edition's password, in two of the job's secrets) and a container that
exits non-zero each end the job with one reason and its exit code, and leave no instance, container or process
behind; a job booted from a container job's snapshot finds the image there and pulls nothing."""

from __future__ import annotations

import os
import re
import secrets
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator.providers.tencent import StaticCredential, TencentSdk
from tests.agent.conftest import LIGHT
from tests.containers import REPO, Layer, Pusher, base_layer, code_layer
from tests.e2e.conftest import Cli
from tests.e2e.spot_support import JobWatch, job_folder, spot_overrides, steps_in
from tests.e2e.test_run import no_instance_left
from tests.e2e.test_spot import NOTICE, PACE, STEPS, attempt_log, finish

pytestmark = [pytest.mark.e2e, pytest.mark.container]

REGISTRY = "ccr.ccs.tencentyun.com"  # the personal edition: a password set in the console
REPOSITORY = "cvmjob/train"
IMAGE = f"{REGISTRY}/{REPOSITORY}:1.0"
ENTERPRISE = "cvmjob-team"  # an enterprise instance: cvmjob-team.tencentcloudcr.com, logged in to with tokens
TCR_IMAGE = f"{ENTERPRISE}.tencentcloudcr.com/{REPOSITORY}:1.0"
HUB_IMAGE = f"{REPOSITORY}:1.0"  # on Docker Hub: pulled by instances without a public IP through Tencent's mirror
_LOSS = re.compile(r"^step=(\d+) loss=(\S+)", re.MULTILINE)


def _need_podman() -> None:
    if shutil.which("podman") is None or os.geteuid() != 0:
        if os.environ.get("CI"):
            pytest.fail("the container tests need Podman, as root: `make system` installs it (as root, on Debian)")
        pytest.skip("Podman as root is needed (apt-get install podman runc); CI runs this")


def _torch_image(tmp_path: Path) -> list[Layer]:
    """The image whose Python has torch and trainkit: for a DDP training."""
    return [base_layer(), code_layer(tmp_path)]


def _light_image() -> list[Layer]:
    """Debian's bash and python3 alone: for tiny.py and the failures, a sixth of the bytes to pull and snapshot."""
    return [base_layer(torch=False)]


@pytest.fixture
def registry(cli: Cli) -> str:
    """The light test image in the personal edition, behind the account's password; the CLI's environment holds
    the login the job's secrets name. Returns the password."""
    username, password = _pushed_light_image(cli, REGISTRY)
    cli.extra_env.update({"REGISTRY_USERNAME": username, "REGISTRY_PASSWORD": password})
    return password


def _pushed_light_image(cli: Cli, host: str) -> tuple[str, str]:
    """The light image pushed to the emulator's registry ``host`` by an account given a new password there; the
    login (username, password)."""
    _need_podman()
    password = f"registry-{secrets.token_hex(8)}"
    username = cli.emulator.admin.set_registry_password(password, registry=host)
    Pusher(cli.emulator.endpoint, host, username, password).push(REPOSITORY, "1.0", _light_image())
    return username, password


@pytest.fixture
def enterprise(cli: Cli, tmp_path: Path) -> str:
    """The torch image in a TCR enterprise instance (its id), as ``enterprise_with`` pushes it."""
    return enterprise_with(cli, _torch_image(tmp_path))


@pytest.fixture
def light_enterprise(cli: Cli) -> str:
    """The light image in a TCR enterprise instance (its id)."""
    return enterprise_with(cli, _light_image())


def enterprise_with(cli: Cli, layers: list[Layer]) -> str:
    """An image of ``layers`` in a TCR enterprise instance, pushed with a long-term token as a user's CI would; the
    job logs in with the controller's temporary ones. Returns the instance's id."""
    _need_podman()
    instance = cli.emulator.admin.add_tcr_instance(ENTERPRISE)
    sdk = TencentSdk(StaticCredential(cli.emulator.secret_id, cli.emulator.secret_key), instance["region"],
                     endpoint=cli.emulator.endpoint)
    registry_id = instance["registry_id"]
    login = sdk.call("tcr", "CreateInstanceToken", {"RegistryId": registry_id, "TokenType": "longterm"})
    Pusher(cli.emulator.endpoint, instance["domain"], login["Username"], login["Token"]).push(
        REPOSITORY, "1.0", layers)
    link_default_vpc(sdk, registry_id)
    return registry_id


@pytest.fixture
def docker_hub(cli: Cli) -> str:
    """The light test image on Docker Hub, pushed with a user's login there; anyone pulls it. Returns its name."""
    _pushed_light_image(cli, "registry-1.docker.io")
    return HUB_IMAGE


def link_default_vpc(sdk: TencentSdk, registry_id: str) -> None:
    """The private access of the region's default VPC to the instance, set up once as a user does: the instances
    have no public IP."""
    [vpc] = sdk.call("vpc", "DescribeVpcs", {"Filters": [{"Name": "is-default", "Values": ["true"]}]})["VpcSet"]
    subnet = sdk.call("vpc", "DescribeSubnets", {"Filters": [{"Name": "vpc-id", "Values": [vpc["VpcId"]]}]})
    sdk.call("tcr", "ManageInternalEndpoint", {"RegistryId": registry_id, "Operation": "Create",
                                               "VpcId": vpc["VpcId"], "SubnetId": subnet["SubnetSet"][0]["SubnetId"]})


def container_job(tmp_path: Path, image: str = IMAGE, tcr: str | None = None) -> Path:
    """The quickstart (with paced.py and tiny.py) in ``image``, logged in with the controller's token of the
    enterprise instance ``tcr``, without a login for Docker Hub's, or else with two of its secrets."""
    spec = job_folder(tmp_path)
    public = image == HUB_IMAGE
    login = (f"  login: {{tcr: {tcr}}}\n" if tcr else "" if public else
             "  login: {username_secret: REGISTRY_USERNAME, password_secret: REGISTRY_PASSWORD}\n")
    secrets_line = "" if tcr or public else "secrets: [REGISTRY_USERNAME, REGISTRY_PASSWORD]\n"
    spec.write_text(spec.read_text() + secrets_line + f"container:\n  image: {image}\n" + login)
    return spec


def example_job(tmp_path: Path) -> Path:
    """jobs/container/job.yaml, the README's example, in the quickstart's folder (its workdir) with paced.py."""
    spec = job_folder(tmp_path)
    text = (REPO / "jobs" / "container" / "job.yaml").read_text()
    assert "workdir: ../quickstart\n" in text and f"image: {TCR_IMAGE} " in text, text
    spec.write_text(text.replace("workdir: ../quickstart\n", ""))
    return spec


def losses(log: str) -> dict[int, str]:
    return {int(step): loss for step, loss in _LOSS.findall(log)}


NO_SNAPSHOT = ("--set", "snapshot.enabled=false")


def uninterrupted_losses(job: Path, tmp_path: Path) -> dict[int, str]:
    """The same DDP training run through on this machine, outside any container: the image's torch is this
    environment's, copied (tests/containers.py), so its losses are the reference bit for bit."""
    folder = tmp_path / "uninterrupted"
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "PYTHONPATH": str(REPO),
           "CVMJOB_CHECKPOINT_DIR": str(folder / "checkpoints"), "CVMJOB_OUTPUT_DIR": str(folder / "outputs")}
    done = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nnodes=1",
                           "--nproc_per_node=2", "train.py", "--steps", str(STEPS), *LIGHT.split()],
                          cwd=job, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return losses(done.stdout)


def test_a_container_job_resumes_after_a_reclaim_in_a_new_container_with_the_losses_of_an_uninterrupted_run(
        cli: Cli, enterprise: str, tmp_path: Path) -> None:
    spec = example_job(tmp_path)
    overrides = [*spot_overrides(STEPS, every=STEPS, pace=PACE, ddp=True), *NO_SNAPSHOT,
                 "--set", f"container.login.tcr={enterprise}"]
    watch = JobWatch(cli.emulator)
    process = cli.start("run", str(spec), *overrides)
    try:
        (first,) = watch.running(attempt=1)
        try:
            watch.wait_for_step(attempt=1, step=10, timeout=300)  # a deadline only: a loaded CI machine is slow
        except AssertionError as exc:
            raise AssertionError(f"{exc}:\n{attempt_log(cli, watch.job_id, 1)[-3000:]}") from None
        cli.emulator.admin.reclaim(first["instance_id"], NOTICE)
    finally:
        code = finish(process, cli)
    assert code == 0, cli.output()[-4000:]
    final = cli.status(watch.job_id)
    assert final["state"] == "SUCCEEDED" and final["attempt"] == 2, final["reason"]
    first_log, second_log = attempt_log(cli, watch.job_id, 1), attempt_log(cli, watch.job_id, 2)
    for log in (first_log, second_log):  # each attempt pulled the image on its own instance, and trained in it
        assert f"pulled {TCR_IMAGE}" in log and "world=2 " in log, log[-3000:]
    assert "emergency checkpoint" in watch.result(1)["reason"], watch.result(1)
    emergency = steps_in(first_log)[-1]
    assert 10 <= emergency < STEPS - 1 and steps_in(second_log) == list(range(emergency + 1, STEPS))
    tokens = [c for c in cli.emulator.admin.calls(action="CreateInstanceToken") if c["error"] is None]
    assert len(tokens) >= 3  # the test's push, then one for each attempt's agents
    assert no_instance_left(cli)

    whole = uninterrupted_losses(spec.parent, tmp_path)
    assert sorted(whole) == list(range(STEPS))
    assert {**losses(first_log), **losses(second_log)} == whole  # bit for bit: the same losses at every step


WRONG_IMAGE = f"{ENTERPRISE}.tencentcloudcr.com/cvmjob/nope:1.0"


@pytest.mark.parametrize(("case", "state", "said", "code"), [
    ("wrong-image", "FAILED_SETUP", f"pulling {WRONG_IMAGE} failed", 125),
    ("refused-login", "FAILED_SETUP", f"{REGISTRY} refused the login", 125),
    ("failing-container", "FAILED", "the training exited with 3", 3),
])
def test_a_container_job_that_cannot_train_fails_with_one_reason_and_leaves_nothing(
        cli: Cli, request: pytest.FixtureRequest, tmp_path: Path, case: str, state: str, said: str,
        code: int) -> None:
    if case == "refused-login":
        password = request.getfixturevalue("registry")
        cli.extra_env["REGISTRY_PASSWORD"] = password + "-wrong"
        spec = container_job(tmp_path)
    elif case == "wrong-image":
        spec = container_job(tmp_path, WRONG_IMAGE, tcr=request.getfixturevalue("light_enterprise"))
    else:
        spec = container_job(tmp_path, request.getfixturevalue("docker_hub"))
    sets = ["--set", "train.command=exec python3 -c 'import sys; sys.exit(3)'"] if case == "failing-container" else []
    result = cli.run("run", str(spec), *NO_SNAPSHOT, *sets, "--set", "train.max_restarts=0", timeout=300)
    assert result.returncode != 0, result.stdout[-3000:]
    final = cli.status()
    assert final["state"] == state, final["reason"]
    assert said in final["reason"], final["reason"]
    assert final["result"]["exit_code"] == code, final["result"]
    assert no_instance_left(cli)
    if case == "refused-login":
        assert cli.extra_env["REGISTRY_PASSWORD"] not in result.stdout + result.stderr
    if case == "failing-container":  # through Tencent's mirror (the instance has no public IP), under its own name
        log = attempt_log(cli, final["job_id"], 1)
        assert f"pulled {HUB_IMAGE} in" in log and "mirror.ccs.tencentyun.com" in result.stdout, log[-3000:]


def test_a_tcr_instance_the_region_lacks_or_its_vpc_cannot_reach_is_refused_by_the_plan(cli: Cli,
                                                                                         tmp_path: Path) -> None:
    unknown = cli.run("run", str(container_job(tmp_path, TCR_IMAGE, tcr="tcr-00000000")), *NO_SNAPSHOT, timeout=120)
    assert unknown.returncode != 0
    assert "container.login.tcr: ap-guangzhou has no container registry tcr-00000000" in unknown.stderr, unknown.stderr
    unlinked = cli.emulator.admin.add_tcr_instance(ENTERPRISE)["registry_id"]
    refused = cli.run("run", str(container_job(tmp_path / "unlinked", TCR_IMAGE, tcr=unlinked)), *NO_SNAPSHOT,
                      timeout=120)
    assert refused.returncode != 0
    assert "no public IP" in refused.stderr and "ManageInternalEndpoint" in refused.stderr, refused.stderr
    assert cli.emulator.admin.instances() == []  # every instance the account ever had: none


def test_a_job_booted_from_a_container_jobs_snapshot_trains_in_the_image_it_keeps_without_a_pull(
        cli: Cli, light_enterprise: str, tmp_path: Path) -> None:
    spec = container_job(tmp_path, TCR_IMAGE, tcr=light_enterprise)
    short = ("--set", "train.command=exec python3 tiny.py --steps 2 --step-seconds 0.1 --every 1")
    first = cli.run("run", str(spec), *short, timeout=400)  # snapshotted: the node's images are on its disk
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    assert f"pulled {TCR_IMAGE}" in attempt_log(cli, cli.status()["job_id"], 1)
    again = cli.run("run", str(spec), *short, "--set", "image.from_job=quickstart", *NO_SNAPSHOT, timeout=400)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    log = attempt_log(cli, cli.status()["job_id"], 1)
    assert f"{TCR_IMAGE} is on this node already" in log and "pulled " not in log, log[-3000:]
