"""The controller service's settings and the lease's length: constants that `cvmjob controller --help` shows as
defaults, in a module that imports nothing (the engine and the service are the CLI's heaviest imports)."""

from __future__ import annotations

from dataclasses import dataclass

LEASE_SECONDS = 30.0


@dataclass(frozen=True)
class ServiceSettings:
    max_jobs: int = 1000
    lease_seconds: float = LEASE_SECONDS
    # Threads stepping jobs: mostly waiting on COS and the API, so more than the cores; a thousand training jobs
    # are ~330 status reads a second, and 16 threads left launches queued behind them.
    workers: int = 32
    tick_seconds: float = 1.0  # rounds at most this often: the jobs due within a tick share one look at the cloud
    exit_when_idle: bool = False  # a controller started by `run --detach` ends when it has nothing left to drive
