"""``sweep.yaml``: what to search (the space), how a trial's parameters reach its job, what to optimise, and the
limits of a night (trials, parallel, money, brakes). Validated like a job spec: every problem one line, at its field.

A trial's parameters reach the job two ways, both checked against the space before anything is created:
``{name}`` placeholders in ``train.command`` (``python train.py --lr {lr}``), and ``set:``, ``--set``-style
overrides of the job's fields whose values may hold placeholders (``train.env.LR: "{lr}"``). ``{{`` and ``}}``
are literal braces, and a shell's ``${VAR}`` is left alone.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from orchestrator.spec.base import SpecModel, field_problem
from orchestrator.spec.durations import Duration, within
from orchestrator.spec.fields import JobName
from orchestrator.spec.loader import load_file
from orchestrator.spec.notify import NotifyTarget

# A parameter's name: also what a placeholder names, so an identifier.
ParamName = Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")]
# {name}, not ${name} (the shell's) nor {{name}} (literal braces).
_PLACEHOLDER = re.compile(r"(?<![{$])\{([^{}]*)\}(?!\})")
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
Scalar = float | int | str | bool
# Combinations of a grid sweep's space: the grid sampler holds them all in memory (a tuple each).
MAX_GRID_POINTS = 100_000


class Param(SpecModel):
    """One dimension of the search space: ``float`` or ``int`` between ``low`` and ``high``, or ``categorical``
    among ``choices``. The type may be left out: ``choices`` make it categorical, whole-number bounds int, any
    other bounds float."""

    type: Literal["float", "int", "categorical"] | None = None
    low: float | None = None
    high: float | None = None
    log: bool = False
    """Sample on a log scale (learning rates); needs low > 0."""
    step: float | None = None
    """Only multiples of step above low (a grid for int or float)."""
    choices: list[Scalar] | None = None

    @model_validator(mode="after")
    def _consistent(self) -> Param:
        kind = self.kind
        if kind == "categorical":
            if not self.choices:
                raise field_problem("choices", "a categorical parameter needs at least one choice")
            if len(set(map(repr, self.choices))) != len(self.choices):
                raise field_problem("choices", "lists a choice twice")
            for name in ("low", "high", "step"):
                if getattr(self, name) is not None:
                    raise field_problem(name, "a categorical parameter has choices, not bounds")
            return self
        if self.choices is not None:
            raise field_problem("choices", f"an {kind} parameter has low and high, not choices")
        if self.low is None or self.high is None:
            raise field_problem("low" if self.low is None else "high", f"an {kind} parameter needs low and high")
        if not (math.isfinite(self.low) and math.isfinite(self.high)):
            raise field_problem("low", "bounds must be finite numbers")
        if self.low > self.high:
            raise field_problem("low", f"low ({self.low:g}) is above high ({self.high:g}). swap them")
        if self.log and self.low <= 0:
            raise field_problem("low", "a log-scale parameter needs low > 0")
        if self.log and self.step is not None:
            raise field_problem("step", "log and step cannot be combined (Optuna samples one or the other)")
        if self.step is not None and self.step <= 0:
            raise field_problem("step", "must be above 0")
        if kind == "int":
            for name in ("low", "high", "step"):
                value = getattr(self, name)
                if value is not None and value != int(value):
                    raise field_problem(name, f"an int parameter needs whole numbers, got {value:g}")
        return self

    @property
    def kind(self) -> Literal["float", "int", "categorical"]:
        if self.type is not None:
            return self.type
        if self.choices is not None:
            return "categorical"
        bounds = [v for v in (self.low, self.high, self.step) if v is not None]
        whole = bool(bounds) and all(float(v).is_integer() for v in bounds)
        return "int" if whole and not self.log else "float"

    def grid_size(self) -> int | None:
        """How many values the parameter can take, counted without listing them; None when they are not a finite
        list (a float without a step)."""
        if self.kind == "categorical":
            return len(self.choices or [])
        if self.step is None and self.kind == "float":
            return None
        assert self.low is not None and self.high is not None
        return math.floor((self.high - self.low) / (self.step or 1) + 1e-9) + 1

    def grid(self) -> list[Scalar] | None:
        """Every value the parameter can take, when that is a finite list (the grid sampler needs one). Callers
        check grid_size() first: a spec's grid is bounded by MAX_GRID_POINTS when it is validated."""
        if self.kind == "categorical":
            return list(self.choices or [])
        count = self.grid_size()
        if count is None:
            return None
        assert self.low is not None
        step = self.step or 1
        values = [self.low + i * step for i in range(count)]
        return [int(v) for v in values] if self.kind == "int" else [round(v, 12) for v in values]


class Objective(SpecModel):
    """A metric the training reports (``trainkit.report(step, loss, **metrics)``; ``loss`` is the loss), and
    whether lower or higher is better. Its last reported value is the trial's value."""

    metric: Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_.]*$")] = Field(examples=["val_loss"])
    direction: Literal["minimize", "maximize"] = "minimize"


class Sampler(SpecModel):
    type: Literal["tpe", "random", "grid", "cmaes", "gp", "qmc"] = "tpe"
    seed: int | None = None
    """The same seed and the same results draw the same parameters (a sweep to reproduce)."""
    startup_trials: int | None = Field(default=None, ge=0)
    """Random trials before the model-based samplers (tpe, cmaes, gp) take over; Optuna's default if unset."""


class Pruner(SpecModel):
    """Stops a trial whose intermediate values are clearly worse than the others' at the same step."""

    type: Literal["median", "percentile", "asha", "successive-halving", "hyperband", "none"] = "median"
    startup_trials: int = Field(default=3, ge=0)
    """Trials that complete before anything is pruned (median, percentile)."""
    warmup_steps: int = Field(default=0, ge=0)
    """Steps of a trial before it can be pruned (median, percentile)."""
    percentile: float = Field(default=25.0, gt=0, lt=100)
    """percentile: prune below this percentile of the others (for minimize: above 100 - it)."""
    min_resource: int | None = Field(default=None, ge=1)
    """asha, hyperband: the steps every trial gets at least."""
    max_resource: int | None = Field(default=None, ge=1)
    """hyperband: the steps of a full trial (default: the largest step reported)."""
    reduction_factor: int = Field(default=3, ge=2)
    """asha, hyperband: 1 in reduction_factor trials goes on at each rung."""


class Budget(SpecModel):
    """Limits of a sweep: dispatch stops before any is exceeded, and says which."""

    max_cost: float | None = Field(default=None, gt=0)
    """CNY for every trial together: a trial starts only if what was spent, what the running trials will still
    cost and its own estimate fit under it."""
    gpu_hours: float | None = Field(default=None, gt=0)
    """GPU hours for every trial together, counted like max_cost."""
    deadline: Annotated[Duration, within(60, 30 * 86400)] | None = None
    """From the sweep's start (e.g. 8h): no trial starts after it, nor one whose time limit would end past it."""


class Brakes(SpecModel):
    consecutive_failures: int = Field(default=3, ge=1)
    """Training failures in a row (not reclaims, not the cloud's failures) after which the sweep stops dispatching:
    a broken script must not burn the night."""
    per_placement_failures: int = Field(default=3, ge=1)
    """Infrastructure failures on one (zone, instance type) after which trials avoid it."""


class WarmStart(SpecModel):
    study: str = Field(min_length=1)
    """An earlier study in the same store."""
    best: int = Field(default=5, ge=1)
    """Its best N completed trials are the first to run, with their parameters."""


class SweepSpec(SpecModel):
    """A hyperparameter sweep: Optuna asks, cvmjob runs each trial as a job, the controller drives them."""

    study: JobName = Field(examples=["quickstart-lr"])
    """The Optuna study's name: running the same sweep again (tonight) continues it."""
    job: str | dict[str, Any] = Field(examples=["../../jobs/quickstart/job.yaml"])
    """The job spec every trial runs: a path (relative to this file) or the spec inline."""
    space: dict[ParamName, Param] = Field(min_length=1)
    """Parameter name -> its range or choices."""
    set: dict[str, str | float | int | bool] = Field(default_factory=dict)
    """Job fields every trial sets, as --set does (``train.env.LR: "{lr}"``); values may hold placeholders."""
    objective: Objective | list[Objective]
    """What to optimise: one metric, or several (Optuna finds their Pareto front)."""
    sampler: Sampler = Sampler()
    pruner: Pruner = Pruner()
    trials: int = Field(ge=1, le=10_000)
    """Trials of the study in all (those of earlier nights count)."""
    parallel: int = Field(default=1, ge=1, le=1000)
    """Trials running at once."""
    retries: int = Field(default=2, ge=0, le=10)
    """Infrastructure failures of a trial (its job's recovery gave up: no capacity, the cloud refused) retried as a
    new job of the same trial. A reclaim is no failure: the job resumes from its checkpoint on its own."""
    budget: Budget = Budget()
    brakes: Brakes = Brakes()
    warm_start: WarmStart | None = None
    notify: tuple[NotifyTarget, ...] | None = None
    """Where the sweep's end is posted: sweep_finished (with the best trial and the cost) or sweep_stopped
    (docs/notifications.md). Unset: the ``notify`` of $CVMJOB_HOME/config.yaml; ``[]``: none. The trials notify
    only where the job spec itself says so."""

    @property
    def objectives(self) -> list[Objective]:
        return self.objective if isinstance(self.objective, list) else [self.objective]

    @model_validator(mode="after")
    def _consistent(self) -> SweepSpec:
        if isinstance(self.objective, list):
            if not self.objective:
                raise field_problem("objective", "needs at least one metric")
            names = [o.metric for o in self.objective]
            if len(set(names)) != len(names):
                raise field_problem("objective", "names a metric twice")
            if len(names) > 1 and self.pruner.type != "none":
                raise field_problem("pruner", "Optuna prunes single-objective studies only. set pruner: {type: none}")
        for key, value in self.set.items():
            for problem in placeholder_problems(str(value), self.space):
                raise field_problem(f"set.{key}", problem)
        if self.sampler.type == "grid":
            self._check_grid()
        return self

    def _check_grid(self) -> None:
        """The grid sampler lists every combination of the space (Optuna's GridSampler): count them arithmetically
        and refuse a grid too large to list, naming its largest parameter (0..1e12 once exhausted memory here)."""
        sizes: dict[str, int] = {}
        for name, param in self.space.items():
            size = param.grid_size()
            if size is None:
                raise field_problem(f"space.{name}", "the grid sampler needs a step (or choices) for a float")
            sizes[name] = size
        combinations = math.prod(sizes.values())
        if combinations > MAX_GRID_POINTS:
            name = max(sizes, key=lambda n: sizes[n])
            raise field_problem(
                f"space.{name}",
                f"the grid sampler needs every combination listed: {sizes[name]} values here, {combinations} "
                f"combinations in all, above the limit of {MAX_GRID_POINTS}. use a larger step, fewer choices, "
                "or another sampler (random, tpe)")


def placeholders(text: str) -> list[str]:
    """The names of the ``{name}`` placeholders in ``text``, in order."""
    return [match.group(1) for match in _PLACEHOLDER.finditer(text)]


def placeholder_problems(text: str, space: dict[str, Param]) -> list[str]:
    """What is wrong with the placeholders of ``text``: one that names no parameter, or no identifier."""
    problems = []
    for name in placeholders(text):
        if not _IDENTIFIER.match(name):
            problems.append(f"{{{name}}} is not a parameter's name (use {{{{ and }}}} for literal braces)")
        elif name not in space:
            known = ", ".join(sorted(space))
            problems.append(f"the placeholder {{{name}}} names no parameter of the space ({known})")
    return problems


def render(text: str, params: dict[str, Any]) -> str:
    """``text`` with its placeholders replaced by the trial's values (floats in full precision)."""

    def value(match: re.Match[str]) -> str:
        v = params[match.group(1)]
        return repr(v) if isinstance(v, float) else str(v)

    return _PLACEHOLDER.sub(value, text).replace("{{", "{").replace("}}", "}")


def trial_value(value: str | float | int | bool, params: dict[str, Any]) -> Any:
    """A ``set`` value for a trial: ``"{lr}"`` is the parameter's value itself, other text is rendered."""
    if not isinstance(value, str):
        return value
    whole = _PLACEHOLDER.fullmatch(value)
    return params[whole.group(1)] if whole else render(value, params)


def load_sweep(path: Path, overrides: Sequence[str] = ()) -> SweepSpec:
    """The validated sweep at ``path`` with ``--set``-style ``overrides``; SpecError (one line per problem, at its
    ``file:line:col`` or its ``--set``) otherwise."""
    return load_file(path, SweepSpec, "sweep spec", overrides)
