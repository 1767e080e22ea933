"""``python -m tests.faults.submit SPEC [--set k=v ...] [--id-file F]``: plan and submit a job
without driving it; prints its id.

Scenarios inject faults between submission and the first controller action, then drive the job. With
``--id-file`` the process writes the id there and waits for a line on stdin (``go`` or ``go <crash point>``),
then becomes `cvmjob resume <id>` (the CLI's main(), exit codes included, with ``CVMJOB_CRASH_AT`` set to the
crash point if given): one interpreter instead of two per scenario.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from orchestrator import api
from orchestrator.state.home import store_url
from orchestrator.state.store import CRASH_AT_ENV, Store


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("spec", type=Path)
    parser.add_argument("--set", dest="sets", action="append", default=[])
    parser.add_argument("--id-file", type=Path)
    args = parser.parse_args()
    report = api.plan(args.spec, args.sets)
    job_id = api.submit(report, Store(store_url()))
    if args.id_file is None:
        print(job_id)
        return
    tmp = args.id_file.with_suffix(".tmp")
    tmp.write_text(job_id)
    tmp.rename(args.id_file)
    words = sys.stdin.readline().split()
    if not words:
        return  # the scenario gave up on this job
    if len(words) > 1:
        os.environ[CRASH_AT_ENV] = words[1]
    from orchestrator.cli.main import main as cvmjob

    cvmjob(["resume", job_id])


if __name__ == "__main__":
    main()
