"""The admin API's routes, under a path no Tencent API uses: reset, the clock, faults, rate limits, spot reclaims,
stock, the spot quota (what a ticket to Tencent changes), the container registry's password and enterprise instances
(what the console sets and buys), the long-term key's CAM policy (what a sub-account's key is allowed), the call
log, the ledger and the balance, seeding example data into COS, the OIDC providers and roles of
AssumeRoleWithWebIdentity, and settings (the load-test switch ``PUT settings {"run_user_data": false}``: instances
boot without running any process). Callers prove they own the account with ``Authorization: Bearer <SecretKey>``
(instances only ever hold temporary keys, so a job cannot reclaim itself or rewind the clock). That key is private
to the emulator's user (keys.py): whoever holds it runs code as that user, through RunInstances as through these
routes. The state file is written after every call that is not a GET."""

from __future__ import annotations

import hmac
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aiohttp import web

from ..catalog import REGIONS
from ..config import DEFAULT_REGION
from ..cos.seed import SeedError, seed
from ..registry.auth import DOCKER_HUB, DOCKER_HUB_MIRROR, PERSONAL
from ..registry.wire import is_registry
from . import views

if TYPE_CHECKING:
    from ..cloud import Cloud

PREFIX = "/_emulator/"

Body = dict[str, Any]
Route = Callable[["Cloud", Body, "web.Request"], Any]


def _json(data: Any, status: int = 200) -> web.Response:
    return web.Response(body=json.dumps(data).encode(), status=status, headers={"Content-Type": "application/json"})


def _health(cloud: Cloud, body: Body, request: web.Request) -> Any:
    return {"ok": True, "endpoint": cloud.config.endpoint, "now": cloud.clock.now(), "clock": cloud.clock.mode}


def _reset(cloud: Cloud, body: Body, request: web.Request) -> Any:
    cloud.reset(body.get("seed"))
    return {"ok": True}


def _clock(cloud: Cloud, body: Body, request: web.Request) -> Any:
    return {"now": cloud.clock.now(), "mode": cloud.clock.mode}


def _advance(cloud: Cloud, body: Body, request: web.Request) -> Any:
    return {"now": cloud.advance(float(body["seconds"]))}


def _faults(cloud: Cloud, body: Body, request: web.Request) -> Any:
    return cloud.faults.describe()


def _clear_faults(cloud: Cloud, body: Body, request: web.Request) -> Any:
    cloud.faults.clear()
    return {"ok": True}


def _add_api_fault(cloud: Cloud, body: Body, request: web.Request) -> Any:
    return {"id": cloud.faults.add_api(body).id}


def _add_cos_fault(cloud: Cloud, body: Body, request: web.Request) -> Any:
    return {"id": cloud.faults.add_cos(body).id}


def _rate_limit(cloud: Cloud, body: Body, request: web.Request) -> Any:
    cloud.faults.set_rate_limit(str(body["key"]), body.get("per_second"))
    return {"rate_limits": cloud.faults.describe()["rate_limits"]}


def _calls(cloud: Cloud, body: Body, request: web.Request) -> Any:
    """?service=, ?action=, and ?since=<seq>: only the calls numbered after it (a long run reads the log as it
    grows instead of losing what the bounded log drops)."""
    service, action = request.query.get("service"), request.query.get("action")
    since = int(request.query.get("since", "0"))
    return [
        c
        for c in cloud.calls
        if c["seq"] > since
        and (service is None or c["service"] == service)
        and (action is None or c["action"] == action)
    ]


def _cos_requests(cloud: Cloud, body: Body, request: web.Request) -> Any:
    """The COS requests each bucket was sent, by operation (``GetBucket`` for a listing); ?bucket=: only its."""
    wanted = request.query.get("bucket")
    return [{"bucket": bucket, "action": action, "count": count}
            for (bucket, action), count in sorted(cloud.cos.requests.items()) if wanted in (None, bucket)]


def _settings(cloud: Cloud, body: Body, request: web.Request) -> Any:
    return {"run_user_data": cloud.host.run_user_data}


def _set_settings(cloud: Cloud, body: Body, request: web.Request) -> Any:
    """{"run_user_data": false}: the load-test mode (boots start no process); true: back to normal boots. Only for
    instances that boot after the call; it lasts until changed (a reset keeps it) and is not saved."""
    unknown = set(body) - {"run_user_data"}
    if unknown:
        raise ValueError(f"unknown settings {sorted(unknown)}")
    if "run_user_data" in body:
        if not isinstance(body["run_user_data"], bool):
            raise ValueError("'run_user_data' must be true or false")
        cloud.host.run_user_data = body["run_user_data"]
    return _settings(cloud, body, request)


def _instances(cloud: Cloud, body: Body, request: web.Request) -> Any:
    processes = request.query.get("processes", "true")
    if processes not in ("true", "false"):
        raise ValueError(f"processes={processes!r}: use true or false")
    return views.instances(cloud.cvm, cloud.config.endpoint, processes == "true")


def _reclaim(cloud: Cloud, body: Body, request: web.Request) -> Any:
    notice = body.get("notice_seconds", cloud.config.spot_notice_seconds)
    return views.spot(cloud.cvm.reclaim(str(body["instance_id"]), None if notice is None else float(notice)))


def _stock(cloud: Cloud, body: Body, request: web.Request) -> Any:
    return cloud.cvm.stock.set(
        str(body["zone"]), str(body["instance_type"]), str(body["charge_type"]), int(body["count"])
    )


def _quota(cloud: Cloud, body: Body, request: web.Request) -> Any:
    """{"zone": "ap-guangzhou-3", "spot_vcpus": 16}: the zone's spot quota in vCPU cores from now on (no zone: every
    zone's; null: the default, 50), as a ticket would set it; answers {zone: spot_vcpus} of the zones set."""
    unknown = set(body) - {"zone", "spot_vcpus"}
    if unknown or "spot_vcpus" not in body:
        raise ValueError(f"send {{'zone': <zone, optional>, 'spot_vcpus': <cores or null>}}, not {sorted(body)}")
    zone = body.get("zone")
    return {"spot_vcpus": cloud.cvm.quotas.set_spot_vcpus(None if zone is None else str(zone), body["spot_vcpus"])}


def _registry_password(cloud: Cloud, body: Body, request: web.Request) -> Any:
    """{"password": "...", "registry": <host, optional>}: the account's registry password, as the console sets it
    (Tencent Container Registry's personal edition, ccr.ccs.tencentyun.com, by default); the login's username is the
    account's UIN."""
    unknown = set(body) - {"password", "registry"}
    password = body.get("password")
    registry = str(body.get("registry") or PERSONAL)
    if registry == DOCKER_HUB_MIRROR:
        raise ValueError(f"{DOCKER_HUB_MIRROR} has no logins: its images are Docker Hub's; set a password for "
                         f"{DOCKER_HUB} and push there")
    if unknown or not isinstance(password, str) or len(password) < 8 or not is_registry(registry):
        raise ValueError("send {'password': <8 characters or more>, 'registry': <a registry host, optional>}")
    cloud.registry.logins.set_password(registry, password)
    return {"registry": registry, "username": cloud.config.uin}


def _tcr_instance(cloud: Cloud, body: Body, request: web.Request) -> Any:
    """{"name": ..., "region": <optional>}: an enterprise instance of Tencent Container Registry, as the console
    buys one; its domain is <name>.tencentcloudcr.com, and CreateInstanceToken logs in to it."""
    unknown = set(body) - {"name", "region"}
    name, region = body.get("name"), str(body.get("region") or DEFAULT_REGION)
    if unknown or not isinstance(name, str) or region not in REGIONS:
        raise ValueError(f"send {{'name': <instance name>, 'region': <one of {', '.join(REGIONS)}, optional>}}")
    instance = cloud.registry.logins.enterprise.create(name, region)
    return {"registry_id": instance.registry_id, "domain": instance.domain, "region": instance.region}


def _cam_policy(cloud: Cloud, body: Body, request: web.Request) -> Any:
    policy = cloud.iam.account_policy
    return {"policy": None if policy is None else {"version": "2.0", "statement": list(policy.statements)}}


def _set_cam_policy(cloud: Cloud, body: Body, request: web.Request) -> Any:
    """{"policy": {CAM policy}}: the long-term key may do only what it allows, like a sub-account's key, and so may
    the temporary keys it issues from now on; {"policy": null}: the root account's full rights again."""
    if set(body) != {"policy"} or not isinstance(body["policy"], (dict, type(None))):
        raise ValueError("send {'policy': <a CAM policy document, or null>}")
    cloud.iam.narrow(body["policy"])
    return _cam_policy(cloud, body, request)


def _launch_failures(cloud: Cloud, body: Body, request: web.Request) -> Any:
    cloud.faults.add_launch_failure(body)
    return {"rules": cloud.faults.describe()["launch_failures"]}


def _image_faults(cloud: Cloud, body: Body, request: web.Request) -> Any:
    return {"pending": cloud.faults.add_image_faults(str(body["kind"]), int(body.get("count", 1)))}


def _text(body: Body, name: str, default: str | None = None) -> str:
    value = body.get(name, default)
    if not isinstance(value, str):
        raise SeedError(f"{name!r} must be a string")
    return value


async def _seed(cloud: Cloud, body: Body, request: web.Request) -> Any:
    """{"bucket": "name-<appid>", "prefix": "p/", "folder": "/abs/path", "only_if_empty": true,
    "region": "ap-guangzhou"}: see cos/seed.py; the folder must be under a root the emulator was given at start."""
    only_if_empty = body.get("only_if_empty", True)
    if not isinstance(only_if_empty, bool):
        raise SeedError("'only_if_empty' must be true or false")
    return await seed(
        cloud.cos.store, cloud.config.appid, cloud.clock.now,
        bucket=_text(body, "bucket"), region=_text(body, "region", DEFAULT_REGION), prefix=_text(body, "prefix", ""),
        folder=Path(_text(body, "folder")), only_if_empty=only_if_empty, roots=cloud.config.seed_roots,
    )


def _billing(cloud: Cloud, body: Body, request: web.Request) -> Any:
    now = cloud.clock.now()
    return {"balance": cloud.billing.balance(now), "ledger": cloud.billing.ledger(now)}


def _set_balance(cloud: Cloud, body: Body, request: web.Request) -> Any:
    """{"cash_fen": 500}: the account's cash balance from now on, in 分 (DescribeAccountBalance's unit); running
    instances go on consuming it, and their frozen hour stays frozen."""
    fen = body["cash_fen"]
    if not isinstance(fen, int) or isinstance(fen, bool):
        raise ValueError("'cash_fen' must be a whole number of fen")
    now = cloud.clock.now()
    cloud.billing.set_cash(fen, now)
    return cloud.billing.balance(now)


def _expire_credentials(cloud: Cloud, body: Body, request: web.Request) -> Any:
    return {"expired": cloud.iam.expire_all(cloud.clock.now())}


def _add_oidc_provider(cloud: Cloud, body: Body, request: web.Request) -> Any:
    """{"provider_id": "github", "issuer": "https://token.actions.githubusercontent.com", "client_ids": [...],
    "jwks": {"keys": [...]}}: what CreateOIDCConfig takes (Name, IdentityUrl, ClientId, IdentityKey)."""
    return {"provider_id": cloud.web_identity.add_provider(body).provider_id}


def _add_role(cloud: Cloud, body: Body, request: web.Request) -> Any:
    """{"name": "ci", "policy": {CAM policy}, "issuer": "<oidc:iss>", "subject": "<oidc:sub pattern>"}: a role
    that tokens of that issuer (and subject) may assume; answers its RoleArn."""
    return {"arn": f"qcs::cam::uin/{cloud.config.uin}:roleName/{cloud.web_identity.add_role(body).name}"}


ROUTES: dict[tuple[str, str], Route] = {
    ("GET", "health"): _health,
    ("POST", "reset"): _reset,
    ("GET", "clock"): _clock,
    ("POST", "clock/advance"): _advance,
    ("GET", "faults"): _faults,
    ("DELETE", "faults"): _clear_faults,
    ("POST", "faults/api"): _add_api_fault,
    ("POST", "faults/cos"): _add_cos_fault,
    ("PUT", "rate-limits"): _rate_limit,
    ("GET", "calls"): _calls,
    ("GET", "cos-requests"): _cos_requests,
    ("GET", "settings"): _settings,
    ("PUT", "settings"): _set_settings,
    ("GET", "instances"): _instances,
    ("POST", "spot/reclaim"): _reclaim,
    ("PUT", "stock"): _stock,
    ("PUT", "quota"): _quota,
    ("PUT", "registry/password"): _registry_password,
    ("POST", "registry/instances"): _tcr_instance,
    ("GET", "cam/policy"): _cam_policy,
    ("PUT", "cam/policy"): _set_cam_policy,
    ("POST", "launch-failures"): _launch_failures,
    ("POST", "image-faults"): _image_faults,
    ("POST", "seed"): _seed,
    ("GET", "billing"): _billing,
    ("PUT", "billing/balance"): _set_balance,
    ("POST", "credentials/expire"): _expire_credentials,
    ("POST", "oidc-providers"): _add_oidc_provider,
    ("POST", "roles"): _add_role,
}


async def handle(request: web.Request, cloud: Cloud) -> web.StreamResponse:
    token = request.headers.get("Authorization", "").removeprefix("Bearer ").strip()
    if not token or not hmac.compare_digest(token.encode(), cloud.config.secret_key.encode()):
        return _json({"error": "admin calls need 'Authorization: Bearer <SecretKey>'"}, 403)
    route = ROUTES.get((request.method, request.path[len(PREFIX) :].strip("/")))
    if route is None:
        return _json({"error": f"no admin route {request.method} {request.path}"}, 404)
    body: Body = {}
    if request.can_read_body:
        raw = await request.read()
        try:
            body = json.loads(raw) if raw.strip() else {}
        except ValueError as exc:
            return _json({"error": f"the body is not JSON ({exc}): send a JSON object"}, 400)
        if not isinstance(body, dict):
            return _json({"error": f"the body is JSON of type {type(body).__name__}: send a JSON object"}, 400)
    try:
        result: Any = route(cloud, body, request)
        if isinstance(result, Awaitable):
            result = await result
    except SeedError as exc:
        return _json({"error": str(exc)}, 400)
    except (KeyError, ValueError, TypeError) as exc:
        return _json({"error": f"bad admin request: {exc!r}"}, 400)
    if request.method != "GET":
        cloud.save()
    return _json(result)
