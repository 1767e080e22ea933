"""Quality gates (`--gate "val_loss<=0.30"`): a bound on a metric the job reported, checked once it ended.

A gate is ``METRIC OP THRESHOLD`` with OP one of ``<=``, ``<``, ``>=``, ``>`` (whitespace allowed around it) and a
finite threshold. A gate that does not parse is bad input (exit 2, nothing created); a job that succeeded but missed
a gate, or never reported its metric, exits ``EXIT_GATE_FAILED`` (5): the run itself went well, the model did not.
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable, Mapping, Sequence
from enum import Enum

from pydantic import BaseModel, ConfigDict

from ..contract import METRIC_NAME
from ..errors import CvmjobError
from ..text import show_values

_EXAMPLE = "val_loss<=0.30"
# Every run of comparison-like characters is taken as the operator, so `==` or `=>` is named as the wrong one
# instead of leaving `=0.3` as an unreadable threshold; none of them can occur in a metric name or a number.
_OPERATOR = re.compile(r"[<>=!~]+")


class Comparison(str, Enum):
    AT_MOST = "<="
    BELOW = "<"
    AT_LEAST = ">="
    ABOVE = ">"

    def holds(self, value: float, threshold: float) -> bool:
        return _TESTS[self](value, threshold)

    @property
    def opposite(self) -> Comparison:
        """What a value that misses the gate is to the threshold: a missed ``<=`` is ``>``."""
        return _OPPOSITES[self]


_TESTS: dict[Comparison, Callable[[float, float], bool]] = {
    Comparison.AT_MOST: operator.le,
    Comparison.BELOW: operator.lt,
    Comparison.AT_LEAST: operator.ge,
    Comparison.ABOVE: operator.gt,
}
_OPPOSITES = {
    Comparison.AT_MOST: Comparison.ABOVE,
    Comparison.BELOW: Comparison.AT_LEAST,
    Comparison.AT_LEAST: Comparison.BELOW,
    Comparison.ABOVE: Comparison.AT_MOST,
}
_KNOWN = ", ".join(c.value for c in Comparison)


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Gate(_Model):
    metric: str
    comparison: Comparison
    threshold: float
    # As the user wrote it: `0.30` stays `0.30` in every message, where the float would print `0.3`.
    threshold_text: str

    @property
    def expression(self) -> str:
        return f"{self.metric}{self.comparison.value}{self.threshold_text}"


class GateResult(_Model):
    gate: Gate
    passed: bool
    value: float | None  # None: the job never reported the metric
    missed_by: float | None  # how far the value is on the wrong side of the threshold; None unless it missed
    message: str


class GateError(CvmjobError):
    """A gate that does not parse: the one line says what is wrong, the text given, and a good example."""


def parse_gate(text: str) -> Gate:
    def bad(problem: str) -> GateError:
        return GateError(f"gate {text!r}: {problem} (e.g. {_EXAMPLE})")

    if not text.strip():
        raise bad(f"it is empty; give a metric, a comparison ({_KNOWN}) and a threshold")
    found = _OPERATOR.search(text)
    if found is None:
        raise bad(f"no comparison; put one of {_KNOWN} between the metric and the threshold")
    try:
        comparison = Comparison(found.group())
    except ValueError:
        raise bad(f"{found.group()!r} is not a comparison; use one of {_KNOWN}") from None
    metric, threshold_text = text[:found.start()].strip(), text[found.end():].strip()
    if not metric:
        raise bad(f"no metric before {comparison.value!r}")
    if not METRIC_NAME.fullmatch(metric):
        raise bad(f"{metric!r} is not a metric name (letters, digits, '_' and '.', not starting with a digit)")
    if not threshold_text:
        raise bad(f"no threshold after {comparison.value!r}")
    try:
        threshold = float(threshold_text)
    except ValueError:
        raise bad(f"the threshold {threshold_text!r} is not a number") from None
    if not math.isfinite(threshold):
        raise bad(f"the threshold {threshold_text!r} is not a finite number")
    return Gate(metric=metric, comparison=comparison, threshold=threshold, threshold_text=threshold_text)


def check(gates: Sequence[Gate], metrics: Mapping[str, float]) -> list[GateResult]:
    """Each gate against the job's final metrics, in the order given."""
    return [_check(gate, metrics.get(gate.metric)) for gate in gates]


def _check(gate: Gate, value: float | None) -> GateResult:
    if value is None:
        message = (f"{gate.metric} was never reported: the training script must report it, "
                   f"e.g. trainkit.report(step, loss, {gate.metric}=value)")
        return GateResult(gate=gate, passed=False, value=None, missed_by=None, message=message)
    shown = show_values({gate.metric: value})
    if gate.comparison.holds(value, gate.threshold):
        return GateResult(gate=gate, passed=True, value=value, missed_by=None,
                          message=f"{shown} {gate.comparison.value} {gate.threshold_text}")
    missed_by = abs(value - gate.threshold)
    message = f"{shown} {gate.comparison.opposite.value} {gate.threshold_text} (missed by {missed_by:.4g})"
    return GateResult(gate=gate, passed=False, value=value, missed_by=missed_by, message=message)
