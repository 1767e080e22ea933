"""Transient failures a training's log names, which ``train.retry.on_log`` retries on a fresh instance: pure, over
the log tail a node's result.json carries (the last 50 lines of the training's output, agent/result.py).

- ``nccl_timeout``: PyTorch's NCCL watchdog aborting a collective that ran past its timeout ("Watchdog caught
  collective operation timeout: WorkNCCL(...) ran for 600000 milliseconds before timing out", ProcessGroupNCCL.cpp;
  e.g. pytorch/pytorch#118369). A slow or broken peer or link, rarely the script.
- ``gpu_xid``: a GPU's hardware or driver fault, NVIDIA's Xid errors (https://docs.nvidia.com/deploy/xid-errors/):
  the kernel's "NVRM: Xid" line where the training prints it, and the CUDA errors such a fault surfaces as in the
  training (an uncorrectable ECC error, Xid 48/63/64; a GPU fallen off the bus or lost, Xid 79).
Errors of the script's own (an illegal memory access, out of memory) are not listed: a fresh instance repeats them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import get_args

from ..spec.workload import LogCause

# Each cause: its signs in a log, and how a reason names it.
_CAUSES: dict[str, tuple[re.Pattern[str], str]] = {
    "nccl_timeout": (re.compile(r"Watchdog caught collective operation timeout|"
                                r"WorkNCCL\(.*\) ran for \d+ milliseconds before timing out"), "an NCCL timeout"),
    "gpu_xid": (re.compile(r"NVRM: Xid|uncorrectable ECC error encountered|GPU has fallen off the bus|GPU is lost"),
                "a GPU's Xid error"),
}
assert set(_CAUSES) == set(get_args(LogCause)), "every cause the spec names has its signs here"


def log_cause(tail: str, wanted: Iterable[str]) -> str | None:
    """In words, the first of ``wanted`` (LogCause names, as RetryRules keeps them) whose signs are in ``tail``;
    None when none is."""
    return next((words for signs, words in (_CAUSES[cause] for cause in wanted) if signs.search(tail)), None)
