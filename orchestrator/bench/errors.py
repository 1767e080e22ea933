"""`--gpus`'s refusal, in a module of its own: `cvmjob bench` catches it, and the CLI loads bench/spec.py (the job
spec's models) only when a benchmark runs (benchmarks/cli_startup.py)."""

from __future__ import annotations


class GpusError(ValueError):
    pass
