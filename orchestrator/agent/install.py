"""``python3 -m orchestrator.agent.install --stage DIR --job J --attempt A --node N``: the second half of the
UserData bootstrap (orchestrator/staging/bootstrap.py), which fetched the agent wheel and agent.json into DIR and
unpacked the wheel (and the agent's own requirements, when the image lacks them) into DIR/lib.

It moves them to the node's home (paths.node_home), writes ``run-agent.sh`` there, links it into cloud-init's
per-boot scripts so that a rebooted instance resumes its agent, and starts the agent in the background. Only the
standard library and the agent's path modules are imported: this runs before anything else is known to work.
seal.py undoes all of it before a snapshot.
"""

from __future__ import annotations

import argparse
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from .paths import node_home, per_boot_script

AGENT_FILES = ("agent.whl", "agent.json", "lib")


def install(stage: Path, job_id: str, attempt: int, node: int) -> Path:
    """The node's home, with the agent in it and linked for every boot; the agent is not started."""
    home = node_home(job_id, attempt, node)
    home.mkdir(parents=True, exist_ok=True)
    for name in AGENT_FILES:
        target = home / name
        if target.is_dir():
            shutil.rmtree(target)
        shutil.move(str(stage / name), str(target))
    agent = (f"exec python3 -m orchestrator.agent --config {shlex.quote(str(home / 'agent.json'))} "
             f"--workdir {shlex.quote(str(home))} >>{shlex.quote(str(home / 'agent.log'))} 2>&1")
    script = home / "run-agent.sh"
    script.write_text(f"#!/bin/bash\ncd {shlex.quote(str(home))} && PYTHONPATH={shlex.quote(str(home / 'lib'))} "
                      f"{agent}\n")
    script.chmod(0o755)
    link = per_boot_script(job_id)
    link.parent.mkdir(parents=True, exist_ok=True)
    link.unlink(missing_ok=True)
    link.symlink_to(script)
    return home


def start(home: Path) -> None:
    """The agent in the background, immune to the hang-up of the boot script that started it."""
    subprocess.Popen(["nohup", str(home / "run-agent.sh")], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                     stderr=subprocess.DEVNULL, close_fds=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m orchestrator.agent.install", description=__doc__)
    parser.add_argument("--stage", type=Path, required=True, help="the folder the bootstrap fetched into")
    parser.add_argument("--job", required=True, help="the job id")
    parser.add_argument("--attempt", type=int, required=True)
    parser.add_argument("--node", type=int, required=True)
    args = parser.parse_args(argv)
    home = install(args.stage, args.job, args.attempt, args.node)
    shutil.rmtree(args.stage, ignore_errors=True)
    start(home)
    print(f"cvmjob: agent installed in {home} and started")
    return 0


if __name__ == "__main__":
    sys.exit(main())
