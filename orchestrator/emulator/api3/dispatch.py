"""One API 3.0 call: authenticate, route by service/version/action, apply faults, call, wrap the answer.

A few actions may be sent unsigned, with ``Authorization: SKIP`` (AssumeRoleWithWebIdentity: it is how a caller
without keys gets some); every other action needs its TC3 signature, SKIP or not.

Every answer is HTTP 200 with ``Content-Type: application/json`` exactly and a ``RequestId``: the Python SDK
treats any other status as a network error and silently ignores errors sent with a charset
(shared/reference/tencent-cloud-api.md §0 items 1-3).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol
from urllib.parse import urlsplit

from ..errors import ApiError
from ..iam import Iam, Policy, Principal
from .params import Params, unflatten
from .signing import verify_tc3

UNSIGNED = "SKIP"
# The caller of an unsigned request: no key, no rights of its own.
_ANONYMOUS = Principal("", Policy(()), temporary=True)


@dataclass(frozen=True)
class CallContext:
    principal: Principal
    region: str
    request_id: str
    service: str
    action: str
    language: str


Handler = Callable[[CallContext, Params], dict[str, Any]]


@dataclass(frozen=True)
class Action:
    handler: Handler
    # Describe/Inquiry calls change nothing: the state file is not rewritten after them.
    mutates: bool = True
    # Callable with ``Authorization: SKIP``; the caller's policy does not apply: its authority is in its parameters.
    unsigned: bool = False


@dataclass
class Service:
    name: str
    version: str
    actions: dict[str, Action] = field(default_factory=dict)

    def action(self, name: str, *, mutates: bool = True, unsigned: bool = False) -> Callable[[Handler], Handler]:
        def register(fn: Handler) -> Handler:
            self.actions[name] = Action(fn, mutates, unsigned)
            return fn

        return register


class FaultGate(Protocol):
    """What the fault injector decides before a call: raise ApiError to fail it, return True to drop the
    response after the call commits."""

    def before_api_call(self, service: str, action: str) -> tuple[bool, float]: ...


@dataclass(frozen=True)
class CallResult:
    body: bytes
    service: str
    action: str
    error_code: str | None
    mutated: bool
    drop_response: bool = False
    delay: float = 0.0
    params: dict[str, Any] | None = None  # the request's, for the actions whose calls the admin log shows in full


# Launches (and their DryRuns): the admin call log keeps what they asked for, to compare a plan's probe with a
# job's launch (UserData and all). Rare enough to keep whole.
PARAMS_LOGGED = frozenset({"RunInstances", "ResetInstance"})


def parse_params(method: str, target: str, body: bytes) -> dict[str, Any]:
    if method.upper() == "GET":
        return unflatten(urlsplit(target).query)
    if not body.strip():
        return {}
    try:
        data = json.loads(body)
    except ValueError:
        raise ApiError("InvalidParameter", "The request body is not valid JSON.") from None
    if not isinstance(data, dict):
        raise ApiError("InvalidParameter", "The request body must be a JSON object.")
    return data


def envelope(request_id: str, payload: dict[str, Any]) -> bytes:
    return json.dumps({"Response": {**payload, "RequestId": request_id}}, ensure_ascii=False).encode()


def error_envelope(request_id: str, err: ApiError) -> bytes:
    return envelope(request_id, {"Error": {"Code": err.code, "Message": err.message}})


def call(
    *,
    method: str,
    target: str,
    headers: Mapping[str, str],
    body: bytes,
    services: Mapping[str, Service],
    iam: Iam,
    wall_now: float,
    cloud_now: float,
    faults: FaultGate,
) -> CallResult:
    request_id = str(uuid.uuid4())
    service_name = "?"
    action_name = headers.get("X-TC-Action", "")
    version = headers.get("X-TC-Version", "")
    logged: dict[str, Any] | None = None
    try:
        if headers.get("Authorization", "").strip() == UNSIGNED:
            service_name, principal = _unsigned_service(services, action_name, version), _ANONYMOUS
        else:
            signed = verify_tc3(method, target, headers, body, iam.secret_for, wall_now)
            service_name = signed.service
            principal = _principal(iam, signed.secret_id, headers, cloud_now)
        service = services.get(service_name)
        if service is None:
            raise ApiError("InvalidAction", f"The service `{service_name}` is not offered here.")
        if version != service.version:
            raise ApiError(
                "NoSuchVersion",
                f"The API version `{version}` of `{service_name}` does not exist; use {service.version}.",
            )
        action = service.actions.get(action_name)
        if action is None:
            raise ApiError("InvalidAction", f"The action `{action_name}` of `{service_name}` does not exist.")
        if not action.unsigned and not principal.may(f"name/{service_name}:{action_name}"):
            raise unauthorized(service_name, action_name)
        drop, delay = faults.before_api_call(service_name, action_name)
        ctx = CallContext(
            principal=principal,
            region=headers.get("X-TC-Region", ""),
            request_id=request_id,
            service=service_name,
            action=action_name,
            language=headers.get("X-TC-Language", "zh-CN"),
        )
        params = parse_params(method, target, body)
        logged = params if action_name in PARAMS_LOGGED else None
        payload = action.handler(ctx, Params(params))
        return CallResult(envelope(request_id, payload), service_name, action_name, None, action.mutates, drop, delay,
                          logged)
    except ApiError as err:
        return CallResult(error_envelope(request_id, err), service_name, action_name, err.code, False, params=logged)


def unauthorized(service: str, action: str) -> ApiError:
    """A CAM denial, worded as Tencent Cloud words it (its message, then CAM's own line for the action)."""
    return ApiError(
        "AuthFailure.UnauthorizedOperation",
        "You are not authorized to perform this operation. Check your CAM policies, and ensure that you are using "
        f"the correct access keys. [you are not authorized to perform operation ({service}:{action})\n"
        "resource (*) has no permission]",
    )


def _unsigned_service(services: Mapping[str, Service], action_name: str, version: str) -> str:
    """The service of an action that may be sent unsigned. Without a signature the request names no service (that
    is the signature's scope, or the real cloud's host name), so the action and its version pick it."""
    for service in services.values():
        action = service.actions.get(action_name)
        if action is not None and action.unsigned and service.version == version:
            return service.name
    allowed = sorted(n for s in services.values() for n, a in s.actions.items() if a.unsigned)
    raise ApiError(
        "AuthFailure.SignatureFailure",
        f"`{action_name}` must be signed: only {', '.join(allowed)} may be sent with Authorization: {UNSIGNED}.",
    )


def _principal(iam: Iam, secret_id: str, headers: Mapping[str, str], now: float) -> Principal:
    cred = iam.temporary(secret_id)
    if cred is None:
        return iam.long_term(secret_id)
    if headers.get("X-TC-Token", "") != cred.token:
        raise ApiError("AuthFailure.TokenFailure", "The X-TC-Token is missing or does not match the SecretId.")
    if cred.expires_at <= now:
        raise ApiError("AuthFailure.TokenFailure", "The temporary credential has expired.")
    return Principal(secret_id, cred.policy, temporary=True)
