"""The spot market's interruptions.

Tencent reclaims spot instances only for capacity, picked at random, with a notice on the metadata service two
minutes before (``spot/termination-time``, UTC+8 ``YYYY-MM-DD HH:MM:SS``); the instance is then released and its
data is not kept (shared/reference/tencent-cloud-api.md §3). The emulator reclaims when the admin API says so
(with or without a notice) and, with ``--spot-reclaim-rate R``, on its own: R reclaims per spot instance-hour on
average, so each instance's time to its notice, counted from its first RUNNING, is exponential with mean 1/R
hours, drawn from ``random.Random(f"{seed}:{instance_id}")`` (the same seed and id give the same time on every
run). Spot capacity itself is the SPOTPAID stock of cvm/stock.py.
"""

from __future__ import annotations

import random


def reclaim_delay(seed: int, instance_id: str, rate_per_hour: float) -> float | None:
    """Seconds from an instance's first RUNNING to its reclaim notice; None when random reclaims are off."""
    if rate_per_hour <= 0:
        return None
    return random.Random(f"{seed}:{instance_id}").expovariate(rate_per_hour / 3600.0)
