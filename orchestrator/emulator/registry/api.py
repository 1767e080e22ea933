"""TCR 2019-09-24: CreateInstanceToken, the temporary (or long-term) login to an enterprise instance.

Parameters and answer as documented (https://www.tencentcloud.com/document/product/1051/45154): RegistryId
(required), TokenType (temp, the default, or longterm), Desc; Username, Token, ExpTime, TokenId (long-term only).
ExpTime is "a timestamp ... without unit": the emulator answers seconds.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..api3.dispatch import CallContext, Service
from ..api3.params import Params
from ..ids import new_id
from .enterprise import Enterprise


def build(enterprise: Enterprise, now: Callable[[], float]) -> Service:
    service = Service("tcr", "2019-09-24")

    @service.action("CreateInstanceToken")
    def create_instance_token(ctx: CallContext, params: Params) -> dict[str, Any]:
        token_type = params.str("TokenType", "temp") or "temp"
        params.str("Desc")
        token, value = enterprise.issue(params.req_str("RegistryId"), ctx.region, token_type, now())
        answer: dict[str, Any] = {"Username": token.username, "Token": value, "ExpTime": int(token.expires)}
        answer["TokenId"] = new_id("tk") if token_type == "longterm" else None
        return answer

    return service
