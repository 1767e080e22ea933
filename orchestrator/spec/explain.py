"""Pydantic's validation errors turned into one plain line each: field path, what is wrong, how to fix it.

The model is walked along each error's location to find what the message needs (the valid field names at
that level, a Literal's choices, a number's bounds, a field's example), so the text never depends on
pydantic's own wording.
"""

from __future__ import annotations

import types
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import annotated_types
import yaml
from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo
from pydantic_core import ErrorDetails

from orchestrator.spec.base import FIELD_PROBLEM
from orchestrator.spec.errors import Problem
from orchestrator.spec.sources import Sources
from orchestrator.spec.suggest import did_you_mean

_KEY = "[key]"  # pydantic's location marker for an error in a mapping's key


def explain(error: ValidationError, model: type[BaseModel], source: str | Sources) -> list[Problem]:
    """One Problem per error in ``error``, raised while validating ``model`` from the file ``source`` (with
    Sources: each at its field's ``file:line:col``, or the ``--set`` that set it)."""
    return [_problem(detail, model, source) for detail in error.errors(include_url=False)]


@dataclass(frozen=True)
class _Site:
    """What the model declares at one location: the bare type, its constraints, and the field if any."""

    annotation: Any
    metadata: tuple[Any, ...]
    field: FieldInfo | None


def _problem(detail: ErrorDetails, model: type[BaseModel], source: str | Sources) -> Problem:
    loc: tuple[int | str, ...] = tuple(detail["loc"])
    ctx = detail.get("ctx", {})
    if detail["type"] == FIELD_PROBLEM:
        loc += tuple(str(ctx["field"]).split("."))
        message = str(ctx["message"])
    else:
        message = _message(detail, model, loc)
    path = ".".join(str(part) for part in loc if part != _KEY)
    return Problem(source if isinstance(source, str) else source.of(loc), path, message)


def _message(detail: ErrorDetails, model: type[BaseModel], loc: tuple[int | str, ...]) -> str:
    kind, value, ctx = detail["type"], detail["input"], detail.get("ctx", {})
    site = _locate(model, loc)
    if kind == "extra_forbidden":
        fields = _fields_of(_locate(model, loc[:-1]))
        hint = did_you_mean(str(loc[-1]), fields) or f"valid fields here: {', '.join(fields)}"
        return f"unknown field. {hint}"
    if kind == "missing":
        return "required field is missing" + _example(loc[-1], site)
    if kind == "value_error":
        return str(ctx["error"])
    if kind == "literal_error" and site is not None and get_origin(site.annotation) is Literal:
        return _not_a_choice(value, get_args(site.annotation))
    if kind in ("greater_than", "greater_than_equal", "less_than", "less_than_equal"):
        return f"{_show(value)} is out of range. allowed: {_bounds(site.metadata if site else (), ctx)}"
    if kind == "multiple_of":
        return f"{_show(value)} is not a multiple of {ctx['multiple_of']}"
    if kind == "too_long":
        return f"too many entries. at most {ctx['max_length']} are allowed"
    if kind == "string_too_long":
        return f"too long. at most {ctx['max_length']} characters"
    if kind in ("too_short", "string_too_short"):
        return "must not be empty"
    return _wrong_kind(kind, value, site) or f"{detail['msg']} (got {_show(value)})"


def _wrong_kind(kind: str, value: object, site: _Site | None) -> str | None:
    if kind in ("int_type", "int_parsing", "int_from_float"):
        return f"expected a whole number, got {_show(value)}"
    if kind in ("float_type", "float_parsing", "finite_number"):
        return f"expected a number, got {_show(value)}"
    if kind in ("bool_type", "bool_parsing"):
        return f"expected true or false, got {_show(value)}"
    if kind == "string_type":
        hint = ". quote it so YAML reads it as text, e.g. 'yes'" if isinstance(value, bool) else ""
        return f"expected text, got {_show(value)}{hint}"
    if kind in ("model_type", "model_attributes_type", "dict_type"):
        fields = _fields_of(site)
        inside = f" with fields {', '.join(fields)}" if fields else ""
        return f"expected a mapping{inside}, got {_show(value)}"
    if kind in ("list_type", "tuple_type"):
        hint = f". write it as a list: [{value}]" if isinstance(value, str | int | float) else ""
        return f"expected a list, got {_show(value)}{hint}"
    return None


def _not_a_choice(value: object, choices: tuple[Any, ...]) -> str:
    listed = ", ".join(_show(choice) for choice in choices)
    texts = [choice for choice in choices if isinstance(choice, str)]
    hint = did_you_mean(value, texts) if isinstance(value, str) else ""
    return f"{_show(value)} is not one of {listed}" + (f". {hint}" if hint else "")


_BOUND_TYPES = {"ge": annotated_types.Ge, "gt": annotated_types.Gt, "le": annotated_types.Le,
                "lt": annotated_types.Lt}


def _bounds(metadata: Sequence[Any], ctx: dict[str, Any]) -> str:
    """The allowed range in words, from the declared constraints (the error's context names only one bound)."""
    bounds = {key: getattr(item, key) for item in metadata for key, kind in _BOUND_TYPES.items()
              if isinstance(item, kind)}
    for key in _BOUND_TYPES:
        if key in ctx:
            bounds.setdefault(key, ctx[key])
    if "ge" in bounds and "le" in bounds:
        return f"{bounds['ge']}..{bounds['le']}"
    words = {"ge": "at least", "gt": "more than", "le": "at most", "lt": "less than"}
    return " and ".join(f"{words[key]} {bounds[key]}" for key in _BOUND_TYPES if key in bounds)


def _example(name: int | str, site: _Site | None) -> str:
    examples = site.field.examples if site is not None and site.field is not None else None
    return f". e.g. {name}: {_yaml(examples[0])}" if examples else ""


def _fields_of(site: _Site | None) -> list[str]:
    if site is not None and isinstance(site.annotation, type) and issubclass(site.annotation, BaseModel):
        return list(site.annotation.model_fields)
    return []


def _locate(model: type[BaseModel], loc: Sequence[int | str]) -> _Site | None:
    """What ``model`` declares at ``loc``, or None where the location leaves the declared shape."""
    annotation: Any = model
    metadata: tuple[Any, ...] = ()
    field: FieldInfo | None = None
    for part in loc:
        bare, _ = _unwrap(annotation)
        origin = get_origin(bare)
        if isinstance(bare, type) and issubclass(bare, BaseModel) and isinstance(part, str):
            field = bare.model_fields.get(part)
            if field is None:
                return None
            annotation, metadata = field.annotation, tuple(field.metadata)
        elif origin in (tuple, list) and isinstance(part, int):
            annotation, metadata, field = get_args(bare)[0], (), None
        elif origin is dict and part != _KEY:
            annotation, metadata, field = get_args(bare)[1], (), None
        else:
            return None
    bare, more = _unwrap(annotation)
    return _Site(bare, metadata + more, field)


def _unwrap(annotation: Any) -> tuple[Any, tuple[Any, ...]]:
    """``annotation`` without Annotated and Optional, and the constraints Annotated carried."""
    metadata: list[Any] = []
    while True:
        origin = get_origin(annotation)
        if origin is Annotated:
            annotation, *extra = get_args(annotation)
            for item in extra:
                metadata.extend(item.metadata if isinstance(item, FieldInfo) else [item])
        elif origin in (Union, types.UnionType) and type(None) in get_args(annotation):
            members = [member for member in get_args(annotation) if member is not type(None)]
            if len(members) != 1:
                return annotation, tuple(metadata)
            annotation = members[0]
        else:
            return annotation, tuple(metadata)


def _show(value: object) -> str:
    """``value`` as the user wrote it in YAML, shortened."""
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list | tuple):
        return "a list"
    text = repr(value) if isinstance(value, str) else _yaml(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _yaml(value: object) -> str:
    if isinstance(value, str):
        return value
    try:
        dumped = yaml.safe_dump(value, default_flow_style=True, width=1_000_000)
    except yaml.YAMLError:  # not a YAML value (e.g. a model passed to model_validate)
        return repr(value)
    return dumped.removesuffix("\n...\n").strip()
