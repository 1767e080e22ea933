"""Two controllers on one PostgreSQL share N jobs; one is killed with SIGKILL while the jobs train, and the other
takes its jobs over within the lease TTL and a tick, with never a second instance for any node.

    python benchmarks/controller_takeover.py [--jobs 50] [--lease 30] [--reclaims 3] [--train-seconds 90]

The agents are simulated as in controller_scale.py (the emulator's load mode boots instances without running
anything; this process writes every agent's heartbeats and results through the real COS API), and so are its
spot reclaims, which go on while the takeover does. PostgreSQL is Debian's server in a throwaway cluster
(tests/postgres.py; ``make postgres`` installs it). Two ``cvmjob controller --lease L`` processes share the store
(``CVMJOB_DB``); once both hold jobs and every job trains, the one holding more is killed with SIGKILL.

- takeover: the SIGKILL -> every job the killed replica held is leased by the survivor (or has ended), read from
  the store every 50 ms; its goal, printed beside it, is the lease TTL plus one tick of the controller;
- instances: the emulator's admin view every 0.5 s, every instance with its ``cvmjob:job/attempt/node`` tags: how
  many instances any one (job, attempt, node) ever had (the ClientToken and the fenced store keep it at 1, through
  the takeover), and how many of a job's were alive at once.

The last line is exactly ``controller_takeover: jobs=N succeeded=S takeover_s=T goal_s=G
max_instances_per_node=M``; the exit status is 1 when a job did not succeed, a node had two instances, the
takeover took longer than its goal, or a controller died before its time.
"""

from __future__ import annotations

import argparse
import logging
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root, when run as a script
from controller_scale import (
    REPO,
    Side,
    Watched,
    clean_up,
    cvmjob,
    environment,
    log,
    planned_job,
    start_cloud,
    start_load,
    submit_jobs,
    wait_for_jobs,
)

from orchestrator.contract.tags import TAG_ATTEMPT, TAG_JOB, TAG_NODE
from orchestrator.controller.service import ServiceSettings
from orchestrator.emulator.client import AdminClient, AdminError
from orchestrator.state.store import Store
from tests.postgres import Cluster, fresh_database, server_bindir

TICK_SECONDS = ServiceSettings().tick_seconds
GONE = {"SHUTDOWN", "TERMINATED", "LAUNCH_FAILED"}
INSTANCE_POLL_SECONDS = 0.5
LEASE_POLL_SECONDS = 0.05


class Instances:
    """Every instance the emulator shows, by the (job, attempt, node) its tags name: the ids each ever had, and the
    most of one job's alive in one look."""

    def __init__(self, admin: AdminClient) -> None:
        self.admin = admin
        self.ids: dict[tuple[str, int, int], set[str]] = defaultdict(set)
        self.most_alive_per_job = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="instances", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _run(self) -> None:
        while not self._stop.wait(INSTANCE_POLL_SECONDS):
            try:
                views = self.admin.instances()
            except (AdminError, OSError) as exc:
                log(f"instances: {exc}")
                continue
            alive: dict[str, int] = defaultdict(int)
            for view in views:
                tags = view.get("tags") or {}
                if TAG_JOB not in tags:
                    continue
                key = (tags[TAG_JOB], int(tags[TAG_ATTEMPT]), int(tags.get(TAG_NODE, "0")))
                self.ids[key].add(view["instance_id"])
                if view["state"] not in GONE:
                    alive[key[0]] += 1
            self.most_alive_per_job = max(self.most_alive_per_job, *alive.values(), 0)

    @property
    def most_per_node(self) -> int:
        return max((len(ids) for ids in self.ids.values()), default=0)


def held(store: Store) -> dict[str, set[str]]:
    """The live leases: owner -> the jobs it holds."""
    owners: dict[str, set[str]] = defaultdict(set)
    for lease in store.leases(time.time()):
        owners[lease.owner].add(lease.job_id)
    return owners


def owner_of(store: Store, pid: int) -> str:
    return next(c.owner for c in store.live_controllers(time.time(), 3600) if c.info.get("pid") == pid)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=50, help="jobs the two controllers share")
    parser.add_argument("--lease", type=float, default=30.0, help="the controllers' lease TTL in s")
    parser.add_argument("--reclaims", type=int, default=3, help="jobs whose spot instance is reclaimed")
    parser.add_argument("--train-seconds", type=float, default=90.0, help="simulated training after the span")
    parser.add_argument("--heartbeat", type=float, default=5.0, help="seconds between a simulated agent's reports")
    parser.add_argument("--notice", type=float, default=60.0, help="seconds of notice of a reclaim")
    parser.add_argument("--rate", type=float, default=8.0, help="jobs submitted per second at most")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory (logs)")
    args = parser.parse_args()
    if args.jobs < 2 or not 0 <= args.reclaims <= args.jobs or args.train_seconds < 2 * args.lease:
        parser.error("need --jobs >= 2, 0 <= --reclaims <= --jobs, --train-seconds >= 2 x --lease (the takeover "
                     "happens while the jobs train)")
    bindir = server_bindir()
    if bindir is None:
        print("PostgreSQL is not installed (no /usr/lib/postgresql/*/bin/initdb): run `make postgres`", file=sys.stderr)
        return 2
    logging.getLogger("qcloud_cos").setLevel(logging.WARNING)
    rng = random.Random(args.seed)
    args.baseline_jobs = 0  # start_cloud sizes the stock from these
    deadline = time.time() + 600 + 3 * (args.jobs / args.rate + args.train_seconds)
    root = Path(tempfile.mkdtemp(prefix="controller-takeover-"))
    cluster = Cluster(bindir)
    emulator = agents = calls = instances = None
    controllers: list[Watched] = []
    try:
        cluster.start()
        emulator = start_cloud(root, args)
        environment(emulator)
        report = planned_job(root)
        calls, agents = start_load(emulator, report, args)
        instances = Instances(emulator.admin)
        instances.start()
        with fresh_database(cluster.url) as url:
            side = Side("two controllers", root / "home", db=url)
            store = side.store()
            for number in (1, 2):
                with (root / f"controller-{number}.log").open("ab") as out:
                    popen = subprocess.Popen(cvmjob("controller", "--lease", str(args.lease)), env=side.env(),
                                             cwd=REPO, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
                controllers.append(Watched(f"controller {number}", popen))
            killed: list[Watched] = []

            def alive() -> str:
                dead = [c for c in controllers if c.popen.poll() is not None and c not in killed]
                return f"{dead[0].name} exited with {dead[0].popen.returncode}" if dead else ""

            while len(store.live_controllers(time.time(), args.lease)) < 2:
                if alive() or time.time() > deadline:
                    raise SystemExit(alive() or "the controllers did not register")
                time.sleep(0.2)
            chosen = rng.sample(range(args.jobs), args.reclaims)
            reclaim_after = {i: rng.uniform(5.0, args.train_seconds / 2) for i in chosen}
            span = args.jobs / args.rate
            if not submit_jobs(side, report, args.jobs, args.rate, agents, span + args.train_seconds, reclaim_after,
                               deadline, alive):
                raise SystemExit(side.died)
            log(f"{args.jobs} jobs submitted in {time.time() - side.started:.1f} s")

            def training(job_id: str) -> bool:
                return any(a.job_id == job_id and a.running_since is not None for a in agents.agents.values())

            while True:  # both hold jobs, every job holds a lease and trains: the middle of the run
                leases = held(store)
                if (len(leases) == 2 and set().union(*leases.values()) >= set(side.jobs)
                        and all(training(j) for j in side.jobs)):
                    break
                if alive() or time.time() > deadline:
                    raise SystemExit(alive() or f"the jobs were not all held and training by the deadline: {leases}")
                time.sleep(0.5)
            owners = {owner_of(store, c.popen.pid): c for c in controllers}
            victim_owner = max(leases, key=lambda o: len(leases[o]))
            victim, survivor = owners[victim_owner], next(c for o, c in owners.items() if o != victim_owner)
            survivor_owner = next(o for o in owners if o != victim_owner)
            victim_jobs = leases[victim_owner]
            killed.append(victim)
            victim.popen.kill()
            victim.popen.wait(timeout=30)
            killed_at = time.monotonic()
            log(f"SIGKILL {victim.name} holding {len(victim_jobs)} of {args.jobs} jobs")
            while True:
                now_held = held(store).get(survivor_owner, set())
                terminal = {j.job_id for j in store.list_jobs() if j.state.is_terminal()}
                if victim_jobs <= now_held | terminal:
                    takeover = time.monotonic() - killed_at
                    break
                if alive() or time.time() > deadline:
                    raise SystemExit(alive() or "the survivor never took the jobs over")
                time.sleep(LEASE_POLL_SECONDS)
            log(f"{survivor.name} holds every job {takeover:.1f} s after the SIGKILL")
            side.processes = [survivor]
            wait_for_jobs(side, deadline, alive)
            states = {j.job_id: j for j in store.list_jobs()}
            store.close()
            instances.stop()
            calls.stop()
        succeeded = sum(1 for s in side.states.values() if s == "SUCCEEDED")
        relaunched = sum(1 for j in side.jobs if states[j].attempt > 1)
        throttled = sum(1 for c in calls.calls if c["error"] == "RequestLimitExceeded")
        goal = args.lease + TICK_SECONDS
        print(f"two controllers on one PostgreSQL ({os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}); "
              f"lease TTL {args.lease:g} s, a tick {TICK_SECONDS:g} s")
        print(f"AGENTS ARE SIMULATED (the emulator's load mode; this process wrote {agents.writes} documents through "
              f"the real COS API); {len(agents.reclaims)} spot reclaims during the run")
        print()
        rows = [
            ("jobs", str(args.jobs), ""),
            ("jobs succeeded", str(succeeded), str(args.jobs)),
            ("jobs the killed controller held", str(len(victim_jobs)), ""),
            ("takeover: SIGKILL -> the survivor holds them, s", f"{takeover:.1f}", f"<= {goal:g}"),
            ("instances any one (job, attempt, node) had", str(instances.most_per_node), "1"),
            ("a job's instances alive at once, most", str(instances.most_alive_per_job), "1"),
            ("jobs relaunched after a reclaim", str(relaunched), str(len(agents.reclaims))),
            ("RequestLimitExceeded answers", str(throttled), "0"),
        ]
        print(f"{'':<50} {'measured':>10} {'goal':>10}")
        for label, measured, want in rows:
            print(f"{label:<50} {measured:>10} {want:>10}")
        problems = [f"{args.jobs - succeeded} job(s) did not succeed: {side.states}"] if succeeded < args.jobs else []
        problems += [side.died] if side.died else []
        if instances.most_per_node > 1:
            problems.append(f"a node had {instances.most_per_node} instances: "
                            f"{ {k: v for k, v in instances.ids.items() if len(v) > 1} }")
        if takeover > goal:
            problems.append(f"the takeover took {takeover:.1f} s, more than the lease TTL and a tick ({goal:g} s)")
        for problem in problems:
            print(f"FAILED: {problem}", file=sys.stderr)
        print(f"controller_takeover: jobs={args.jobs} succeeded={succeeded} takeover_s={takeover:.1f} goal_s={goal:g} "
              f"max_instances_per_node={instances.most_per_node}", flush=True)
        return 1 if problems else 0
    finally:
        clean_up(root, args.keep, *controllers, instances, agents, calls, emulator, cluster)


if __name__ == "__main__":
    sys.exit(main())
