"""The UserData script: fetch the agent and its config through presigned URLs into a temporary folder, then hand
over to the agent's installer (orchestrator/agent/install.py), which lays them out, makes cloud-init start the
agent at every boot, and starts it. It holds no secret: the URLs are signatures, not keys (the config they point
at holds short-lived keys scoped to the job). Where the instance's "/" is, the installer knows (agent/host.py).
"""

from __future__ import annotations

import base64
import shlex
from urllib.parse import urlsplit

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
python3 -m zipfile -e agent.whl lib
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


def user_data(job_id: str, attempt: int, node: int, wheel_url: str, config_url: str,
              pip_index: str | None = None) -> str:
    """The base64 UserData for one node of one attempt; ``pip_index``: where its pip installs from, if not pip's
    own index (an instance without a public IP reaches only Tencent's mirror)."""
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
    )
    encoded = base64.b64encode(script.encode()).decode()
    if len(encoded) > MAX_USER_DATA:
        raise ValueError(f"UserData is {len(encoded)} bytes base64; Tencent Cloud accepts at most {MAX_USER_DATA}")
    return encoded
