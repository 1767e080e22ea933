"""The sweep's own refusal, in a module of its own: `cvmjob sweep run` catches it, and the CLI loads sweep/run.py
(Optuna's side) only when a sweep runs (benchmarks/cli_startup.py)."""

from __future__ import annotations


class SweepBusy(Exception):
    """Another live `sweep run` drives this study, or took it over from this one."""
