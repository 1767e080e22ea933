"""Request parameters: POST JSON as sent, or GET form flattened as ``Filters.0.Values.1=x`` (0-based).

Values arrive typed (JSON from the SDK), as strings typed by a schema (tccli sends VPC's ``Limit`` as "5"), or
as plain strings (GET). The accessors coerce and raise the codes the real API uses for bad values.
"""

from __future__ import annotations

import builtins
from typing import Any
from urllib.parse import parse_qsl

from ..errors import ApiError


def unflatten(query: str) -> dict[str, Any]:
    root: dict[str, Any] = {}
    for key, value in parse_qsl(query, keep_blank_values=True):
        parts = key.split(".")
        node: Any = root
        for i, part in enumerate(parts):
            last = i == len(parts) - 1
            nxt: Any = value if last else ({} if not parts[i + 1].isdigit() else [])
            if isinstance(node, list):
                index = int(part)
                while len(node) <= index:
                    node.append(None)
                if node[index] is None or last:
                    node[index] = nxt
                node = node[index]
            else:
                if part not in node or last:
                    node[part] = nxt
                node = node[part]
    return root


class Params:
    """Typed access to one request's parameters (or a nested object of them)."""

    def __init__(self, data: dict[builtins.str, Any], path: builtins.str = "") -> None:
        if not isinstance(data, dict):
            raise ApiError("InvalidParameter", f"{path or 'request'} must be an object.")
        self._data = data
        self._path = path

    def __contains__(self, name: builtins.str) -> builtins.bool:
        return self._data.get(name) is not None

    def raw(self) -> dict[builtins.str, Any]:
        return self._data

    def _name(self, name: builtins.str) -> builtins.str:
        return f"{self._path}.{name}" if self._path else name

    def _get(self, name: builtins.str, required: builtins.bool) -> Any:
        value = self._data.get(name)
        if value is None and required:
            raise ApiError("MissingParameter", f"The request is missing a required parameter `{self._name(name)}`.")
        return value

    def str(
        self, name: builtins.str, default: builtins.str | None = None, *, required: builtins.bool = False
    ) -> builtins.str | None:
        value = self._get(name, required)
        if value is None:
            return default
        if isinstance(value, (dict, list)):
            raise ApiError("InvalidParameter", f"`{self._name(name)}` must be a string.")
        return str(value)

    def req_str(self, name: builtins.str) -> builtins.str:
        value = self.str(name, required=True)
        assert value is not None
        return value

    def int(
        self, name: builtins.str, default: builtins.int | None = None, *, required: builtins.bool = False
    ) -> builtins.int | None:
        value = self._get(name, required)
        if value is None:
            return default
        if isinstance(value, bool):
            raise ApiError("InvalidParameterValue", f"`{self._name(name)}` must be an integer.")
        try:
            return int(value)
        except (TypeError, ValueError):
            raise ApiError(
                "InvalidParameterValue", f"`{self._name(name)}` must be an integer, not {value!r}."
            ) from None

    def float(self, name: builtins.str, default: builtins.float | None = None) -> builtins.float | None:
        value = self._get(name, False)
        if value is None:
            return default
        try:
            return float(value)
        except (TypeError, ValueError):
            raise ApiError("InvalidParameterValue", f"`{self._name(name)}` must be a number.") from None

    def bool(self, name: builtins.str, default: builtins.bool = False) -> builtins.bool:
        value = self._get(name, False)
        if value is None:
            return default
        if isinstance(value, bool):
            return value
        if str(value).lower() in ("true", "1"):
            return True
        if str(value).lower() in ("false", "0"):
            return False
        raise ApiError("InvalidParameterValue", f"`{self._name(name)}` must be true or false.")

    def list(
        self,
        name: builtins.str,
        *,
        required: builtins.bool = False,
        max_items: builtins.int | None = None,
        too_many_code: builtins.str = "InvalidParameterValue",
    ) -> builtins.list[Any]:
        value = self._get(name, required)
        if value is None:
            return []
        if not isinstance(value, list):
            raise ApiError("InvalidParameter", f"`{self._name(name)}` must be a list.")
        if max_items is not None and len(value) > max_items:
            raise ApiError(
                too_many_code, f"`{self._name(name)}` holds {len(value)} items; at most {max_items} are allowed."
            )
        return value

    def str_list(
        self, name: builtins.str, *, required: builtins.bool = False, max_items: builtins.int | None = None
    ) -> builtins.list[builtins.str]:
        return [builtins.str(v) for v in self.list(name, required=required, max_items=max_items)]

    def obj(self, name: builtins.str, *, required: builtins.bool = False) -> Params | None:
        value = self._get(name, required)
        if value is None:
            return None
        return Params(value, self._name(name))

    def objs(self, name: builtins.str, *, max_items: builtins.int | None = None) -> builtins.list[Params]:
        return [Params(item, f"{self._name(name)}.{i}") for i, item in enumerate(self.list(name, max_items=max_items))]
