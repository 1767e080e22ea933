"""``python -m tests.faults.many N SPEC [--set k=v ...] [--cancel-when-booting]``: N jobs started together, each
planned, submitted and driven in a thread of this one process (what N `cvmjob run`s do, without N interpreters);
prints a JSON object {job id: end state}, or the error of a job that could not be planned or driven.

``--cancel-when-booting``: each job is cancelled (as `cvmjob cancel` does) once its instance exists, so that the
launches and the teardowns come in bursts and no agent spends its start-up time."""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from orchestrator import api
from orchestrator.controller.drive import drive
from orchestrator.state.home import store_url
from orchestrator.state.store import Store


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("count", type=int)
    parser.add_argument("spec", type=Path)
    parser.add_argument("--set", dest="sets", action="append", default=[])
    parser.add_argument("--cancel-when-booting", action="store_true")
    args = parser.parse_args()
    store = Store(store_url())
    start = threading.Barrier(args.count)
    done = threading.Event()

    def cancel_when_booting() -> None:
        while not done.wait(0.2):
            try:
                for job in store.list_jobs(active_only=True):
                    # Once its instance exists: BOOTING, or already RUNNING (a round can take a job through BOOTING
                    # between two looks of this thread).
                    if job.state.value in ("BOOTING", "RUNNING") and not job.cancel_requested:
                        store.request_cancel(job.job_id, time.time())
            except Exception as exc:  # a store error costs one round, not every later cancel
                # In one CI run 25 of 50 jobs trained to their end uncancelled, most likely because this daemon
                # thread had died (its stderr was not kept). Keep looking, and say why on stderr, which the
                # scenario now shows when it fails.
                print(f"cancel round failed: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)

    if args.cancel_when_booting:
        threading.Thread(target=cancel_when_booting, daemon=True).start()

    def one(index: int) -> tuple[str, str]:
        start.wait()  # together
        try:
            report = api.plan(args.spec, [*args.sets, f"name=many-{index}"])
            job_id = api.submit(report, store)
        except Exception as exc:  # reported, not raised: the test says what went wrong
            return f"#{index}", f"not submitted: {type(exc).__name__}: {exc}"
        try:
            return job_id, drive(store, job_id).state.value
        except Exception as exc:
            return job_id, f"controller died: {type(exc).__name__}: {exc}"

    with ThreadPoolExecutor(max_workers=args.count) as pool:
        results = dict(pool.map(one, range(args.count)))
    done.set()
    print(json.dumps(results, sort_keys=True))


if __name__ == "__main__":
    main()
