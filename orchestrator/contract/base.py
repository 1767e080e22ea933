"""The contract's base: every document is a model that refuses fields it does not know; the layout's version."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

LAYOUT_VERSION = 1


class Model(BaseModel):
    model_config = ConfigDict(extra="forbid")
