"""CVM 2017-03-12 actions (placeholder until the CVM backend lands)."""

from __future__ import annotations

from ..api3.dispatch import Service
from .models import Cvm


def build(cvm: Cvm) -> Service:
    return Service("cvm", "2017-03-12")
