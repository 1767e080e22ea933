"""The UserData script: start the NVIDIA driver's install where the plan says (Tencent's auto-install, in the
background), fetch the agent and its config through presigned URLs into a temporary folder, then hand over to the
agent's installer (orchestrator/agent/install.py), which lays them out, makes cloud-init start the agent at every
boot, and starts it. It holds no secret: the URLs are signatures, not keys (the config they point at holds
short-lived keys scoped to the job). Where the instance's "/" is, the installer knows (agent/host.py).

A job's launch and its plan's DryRun both take their UserData from ``for_launch``: what the DryRun validates is
what the launch sends, less the job's own names and signatures.
"""

from __future__ import annotations

import base64
import shlex
from urllib.parse import urlsplit

from ..plan.models import Plan
from ..providers.tencent import network
from ..spec.compute import GpuDriver

MAX_USER_DATA = 16 * 1024  # RunInstances: UserData is base64, at most 16 KB

_TEMPLATE = """#!/bin/bash
# cvmjob bootstrap: job {job_id}, attempt {attempt}, node {node}
set -euo pipefail
STAGE="$(mktemp -d -t cvmjob-agent.XXXXXX)"
cd "$STAGE"
fetch() {{  # URL FILE [URL FILE ...], in one interpreter
  python3 -c 'import sys, urllib.request
for url, path in zip(sys.argv[1::2], sys.argv[2::2]): urllib.request.urlretrieve(url, path)' "$@"
}}
for i in 1 2 3 4 5 6; do
  if fetch {wheel_url} agent.whl {config_url} agent.json; then break; fi
  [ "$i" = 6 ] && {{ echo "cvmjob: cannot fetch the agent" >&2; exit 1; }}
  sleep $((i * 5))
done
{driver}python3 -m zipfile -e agent.whl lib
# The agent's own needs; the image provides Python 3.10+ and, for training, torch.
# Found, not imported: importing them all cost a second of CPU at every boot, and the agent imports them anyway.
python3 -c 'import importlib.util as u, sys; sys.exit(any(u.find_spec(m) is None for m in sys.argv[1:]))' \\
    pydantic yaml qcloud_cos fastcrc aiohttp tencentcloud.cvm 2>/dev/null \\
  || python3 -m pip install --quiet --target lib {index}{requirements}
PYTHONPATH="$STAGE/lib" exec python3 -m orchestrator.agent.install --stage "$STAGE" \\
  --job {job_id} --attempt {attempt} --node {node}
"""

AGENT_REQUIREMENTS = (
    "pydantic>=2.7,<3",
    "pyyaml>=6,<7",
    "cos-python-sdk-v5>=1.9.44,<2",
    "tencentcloud-sdk-python-common>=3.1.195,<4",
    "tencentcloud-sdk-python-cvm>=3.1.178,<4",
    "tencentcloud-sdk-python-vpc>=3.1.193,<4",
    "tencentcloud-sdk-python-sts>=3.0.1459,<4",
    "tencentcloud-sdk-python-billing>=3.1.177,<4",
    "fastcrc>=0.3,<1",
    "aiohttp>=3.14,<4",  # many small objects in flight at once (providers/tencent/many.py)
)


# ${TMPDIR:-/tmp}: /tmp under cloud-init, where Tencent's script looks; an emulated instance's own tmp.
_DRIVER = """# The NVIDIA driver by Tencent's auto-install (doc 560/112129): its settings, then its script from the
# mirror, in the background (about 10 minutes); the agent waits for the driver before the setup commands.
DRIVER_TMP="${{TMPDIR:-/tmp}}"
cat > "$DRIVER_TMP/{settings}" <<'EOF'
DRIVER_VERSION={driver}
CUDA_VERSION={cuda}
CUDNN_VERSION={cudnn}
DRIVER_URL=
CUDA_URL=
CUDNN_URL=
EOF
if fetch {installer} "$DRIVER_TMP/auto_install.sh"; then
  chmod +x "$DRIVER_TMP/auto_install.sh"
  nohup "$DRIVER_TMP/auto_install.sh" > "$DRIVER_TMP/{log}" 2>&1 &
else
  echo "cvmjob: cannot fetch the GPU driver's installer {installer}" | tee "$DRIVER_TMP/{log}" >&2
fi
"""


def _public_ip(plan: Plan) -> bool:
    return plan.network is not None and plan.network.public_bandwidth_mbps is not None


def pip_index(plan: Plan) -> str | None:
    """Tencent's in-VPC mirror for instances without a public IP, which reach no other index; None where pip's own
    index is reachable (a public IP)."""
    return None if _public_ip(plan) else network.PIP_MIRROR


def docker_hub_mirror(plan: Plan) -> str | None:
    """Where instances without a public IP pull Docker Hub's images from (Tencent's mirror of it); None where Docker
    Hub itself is reachable (a public IP)."""
    return None if _public_ip(plan) else network.DOCKER_HUB_MIRROR


def for_launch(plan: Plan, instance_type: str, job_id: str, attempt: int, node: int, wheel_url: str,
               config_url: str) -> str:
    """The UserData of one node of one attempt of a job on ``instance_type`` (the driver goes on whole GPUs)."""
    return user_data(job_id, attempt, node, wheel_url, config_url, pip_index=pip_index(plan),
                     driver=plan.driver_for(instance_type))


# What a presigned URL of the state bucket looks like to the DryRun: as long, and naming nothing.
_STAND_IN_URL = "http://cvmjob-dry-run.cos.example.invalid/cvmjob/plan-dry-run/agent?" + "q" * 360


def for_dry_run(plan: Plan, instance_type: str) -> str:
    """The UserData the plan's DryRun sends: the launch's, with stand-ins of a presigned URL's length for the job's
    own names and signatures (a job exists only after its plan)."""
    return for_launch(plan, instance_type, "plan-dry-run", 1, 0, _STAND_IN_URL, _STAND_IN_URL)


def user_data(job_id: str, attempt: int, node: int, wheel_url: str, config_url: str,
              pip_index: str | None = None, driver: GpuDriver | None = None) -> str:
    """The base64 UserData for one node of one attempt; ``pip_index``: where its pip installs from, if not pip's
    own index (an instance without a public IP reaches only Tencent's mirror); ``driver``: the NVIDIA driver to
    install."""
    index = "" if pip_index is None else (f"--index-url {shlex.quote(pip_index)} "
                                          f"--trusted-host {shlex.quote(urlsplit(pip_index).hostname or '')} ")
    script = _TEMPLATE.format(
        index=index,
        job_id=job_id,
        attempt=attempt,
        node=node,
        wheel_url=shlex.quote(wheel_url),
        config_url=shlex.quote(config_url),
        requirements=" ".join(shlex.quote(r) for r in AGENT_REQUIREMENTS),
        driver="" if driver is None else _DRIVER.format(
            settings=network.DRIVER_SETTINGS, log=network.DRIVER_LOG, installer=shlex.quote(network.DRIVER_INSTALLER),
            driver=driver.driver, cuda=driver.cuda, cudnn=driver.cudnn),
    )
    encoded = base64.b64encode(script.encode()).decode()
    if len(encoded) > MAX_USER_DATA:
        raise ValueError(f"UserData is {len(encoded)} bytes base64; Tencent Cloud accepts at most {MAX_USER_DATA}")
    return encoded
