"""Finding and loading named policies.

A name (``default``) is looked up as ``<dir>/<kind>/<name>.yaml`` in the search dirs: the ``policies/`` folder
next to the job spec, then the builtins shipped in this package. A reference with '/' or ending in .yaml/.yml
is a file path (relative ones are relative to ``relative_to``, the spec's folder).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeVar, overload

from pydantic import ValidationError

from orchestrator.policy.models import POLICY_MODELS, PolicyKind, PoolPolicy, RecoveryPolicy
from orchestrator.spec.errors import Problem, SpecError
from orchestrator.spec.explain import explain
from orchestrator.spec.loader import load_spec
from orchestrator.spec.models import JobSpec
from orchestrator.spec.suggest import did_you_mean
from orchestrator.spec.yamlfile import read_mapping

BUILTIN_DIR = Path(__file__).parent / "builtin"
_Policy = TypeVar("_Policy", RecoveryPolicy, PoolPolicy)


def policy_search_dirs(spec_dir: Path) -> tuple[Path, ...]:
    """Where names are looked up for a spec in ``spec_dir``: its ``policies/`` first, then the builtins."""
    return (spec_dir / "policies", BUILTIN_DIR)


def policy_names(kind: PolicyKind, search_dirs: Sequence[Path]) -> list[str]:
    """The names of ``kind`` policies found in ``search_dirs``, sorted."""
    return sorted({path.stem for directory in search_dirs for path in (directory / kind).glob("*.yaml")})


class PolicyNotFound(SpecError):
    """A policy reference that names no file."""


def find_policy(kind: PolicyKind, name_or_path: str, search_dirs: Sequence[Path], *,
                relative_to: Path = Path()) -> Path:
    """The file ``name_or_path`` refers to; PolicyNotFound (with a suggestion) when there is none."""
    if "/" in name_or_path or name_or_path.endswith((".yaml", ".yml")):
        path = relative_to / name_or_path
        if path.is_file():
            return path
        raise PolicyNotFound.single(name_or_path, f"no {kind} policy file {str(path)!r}")
    for directory in search_dirs:
        path = directory / kind / f"{name_or_path}.yaml"
        if path.is_file():
            return path
    names = policy_names(kind, search_dirs)
    hint = did_you_mean(name_or_path, names) or f"available: {', '.join(names) or 'none'}"
    looked = ", ".join(str(directory / kind) for directory in search_dirs)
    raise PolicyNotFound.single(name_or_path, f"no {kind} policy named {name_or_path!r}. {hint} (looked in {looked})")


@overload
def load_policy(kind: Literal["recovery"], name_or_path: str, search_dirs: Sequence[Path], *,
                relative_to: Path = ...) -> RecoveryPolicy: ...
@overload
def load_policy(kind: Literal["pool"], name_or_path: str, search_dirs: Sequence[Path], *,
                relative_to: Path = ...) -> PoolPolicy: ...
def load_policy(kind: PolicyKind, name_or_path: str, search_dirs: Sequence[Path], *,
                relative_to: Path = Path()) -> RecoveryPolicy | PoolPolicy:
    """The validated policy ``name_or_path`` of ``kind``; SpecError says what is wrong, file and field."""
    path = find_policy(kind, name_or_path, search_dirs, relative_to=relative_to)
    model = POLICY_MODELS[kind]
    required = [name for name, field in model.model_fields.items() if field.is_required()]
    document = read_mapping(path, f"{kind} policy", required)
    try:
        return model.model_validate(document)
    except ValidationError as exc:
        raise SpecError(explain(exc, model, str(path))) from exc


@dataclass(frozen=True)
class JobPolicies:
    recovery: RecoveryPolicy
    pool: PoolPolicy


def load_job_policies(spec: JobSpec, spec_path: Path) -> JobPolicies:
    """The policies ``spec`` (read from ``spec_path``) names; SpecError lists the problems of all of them."""
    spec_dir = spec_path.parent
    search_dirs = policy_search_dirs(spec_dir)
    problems: list[Problem] = []

    def collect(kind: PolicyKind, load: Callable[[], _Policy]) -> _Policy | None:
        try:
            return load()
        except PolicyNotFound as exc:
            # Point at the spec's field, where the fix goes.
            problems.extend(Problem(str(spec_path), f"policies.{kind}", p.message) for p in exc.problems)
        except SpecError as exc:
            problems.extend(exc.problems)
        return None

    recovery = collect("recovery", lambda: load_policy("recovery", spec.policies.recovery, search_dirs,
                                                         relative_to=spec_dir))
    pool = collect("pool", lambda: load_policy("pool", spec.policies.pool, search_dirs, relative_to=spec_dir))
    if recovery is None or pool is None:
        raise SpecError(problems)
    return JobPolicies(recovery, pool)


def load_job(path: str | os.PathLike[str], overrides: Sequence[str] = (),
             document: dict[str, Any] | None = None) -> tuple[JobSpec, JobPolicies]:
    """``load_spec``, with the policies it names (loaded once): what a job is submitted with."""
    spec = load_spec(path, overrides, document)
    return spec, load_job_policies(spec, Path(path))
