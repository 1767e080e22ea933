"""The base of every spec and policy model, and the way a cross-field check blames the right field."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict
from pydantic_core import PydanticCustomError

FIELD_PROBLEM = "field_problem"


class SpecModel(BaseModel):
    """Frozen, and unknown fields are errors (a misspelt field must not be silently ignored)."""

    model_config = ConfigDict(
        extra="forbid",
        frozen=True,
        # Field docstrings become the JSON schema's descriptions, so editors show them.
        use_attribute_docstrings=True,
        # YAML reads `EPOCHS: 3` or `version: 1.0` as numbers; they are meant as text in str fields.
        coerce_numbers_to_str=True,
        allow_inf_nan=False,
    )


def field_problem(field: str, message: str) -> PydanticCustomError:
    """An error for a model validator to raise about one of its fields (dotted, e.g. ``alternatives.0``).

    Pydantic puts a model validator's error on the model itself; the error translation (explain.py) moves it
    down to ``field`` so the message points where the fix goes.
    """
    return PydanticCustomError(FIELD_PROBLEM, "{field}: {message}", {"field": field, "message": message})
