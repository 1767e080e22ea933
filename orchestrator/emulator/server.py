"""The HTTP front door: one port for every service.

Routing, in order: the admin API (``/_emulator/...`` on the emulator's own host); COS when the Host header or an
absolute-form target names a bucket host (``<bucket>-<appid>.cos.<region>.myqcloud.com``: the COS SDK in IP mode
and coscmd through HTTP_PROXY), unless an instance asks for a bucket host of another region without a public IP
(``_cross_region``); the instance metadata service when the host is ``metadata.tencentyun.com``
(instances reach it through the proxy the emulator hands them); a container registry when it names a registry
host (Tencent Container Registry's ``ccr.ccs.tencentyun.com`` and enterprise domains, Docker Hub and Tencent's
mirror of it; through the proxy, over http: the emulator has no certificate for them, so its clients list them as
insecure registries), unless an instance without a public IP asks for Docker Hub itself or an enterprise instance
its VPC has no private access to (``_unlinked``); COS ListBuckets for q-signed ``GET /``; and
otherwise API 3.0 (path ``/``, TC3-signed, service from the credential scope).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import re
import socket
from collections.abc import AsyncIterator
from urllib.parse import urlsplit

from aiohttp import web
from aiohttp.typedefs import Handler

from . import mirror
from .admin import routes as admin
from .cloud import Cloud
from .config import EmulatorConfig
from .connection import reset_connection
from .cos.buckets import BUCKET_NAME
from .metadata import service as metadata
from .registry import wire as registry
from .registry.auth import DOCKER_HUB, DOCKER_HUB_MIRROR, PERSONAL

log = logging.getLogger("cvmjob.emulator")

BUCKET_HOST = re.compile(
    rf"^(?P<bucket>{BUCKET_NAME.pattern})\.cos(?:-internal)?\.(?P<region>[a-z0-9-]+)\.(?:myqcloud\.com|tencentcos\.cn)$"
)
METADATA_HOST = "metadata.tencentyun.com"
TICK_SECONDS = 0.05

CLOUD_KEY = web.AppKey("cloud", Cloud)


def request_hosts(request: web.Request) -> list[str]:
    """The Host header, then the host of an absolute-form target (they differ when a client sends an IP-mode
    request through a proxy), each without its port."""
    hosts = [request.headers.get("Host", "")]
    target = request.raw_path
    if target.startswith(("http://", "https://")):
        hosts.append(urlsplit(target).netloc)
    return [h.rsplit(":", 1)[0] if h.count(":") == 1 else h for h in hosts if h]


async def front_door(request: web.Request) -> web.StreamResponse:
    cloud = request.app[CLOUD_KEY]
    hosts = request_hosts(request)
    path = urlsplit(request.raw_path).path
    for host in hosts:
        match = BUCKET_HOST.match(host)
        if match:
            if _cross_region(request, cloud, match["region"]):
                return mirror.unreachable(host)
            return await cloud.cos.handle(request, match["bucket"], match["region"])
        if host == METADATA_HOST:
            return await metadata.handle(request, cloud)
        if host == mirror.HOST:
            return mirror.handle(request, path, cloud.config.driver_install_seconds)
        if registry.is_registry(host):
            if _unlinked(request, cloud, host):
                return mirror.unreachable(host)
            return await cloud.registry.handle(request, host, cloud.clock.now())
    if len(hosts) > 1 and not _ours(hosts[1]):
        return mirror.unreachable(hosts[1])
    if path.startswith(admin.PREFIX):
        return await admin.handle(request, cloud)
    auth = request.headers.get("Authorization", "")
    if auth.startswith("q-sign-algorithm") or "q-sign-algorithm" in request.query_string:
        return await cloud.cos.handle_service(request)
    return await api3(request, cloud)


def _cross_region(request: web.Request, cloud: Cloud, region: str) -> bool:
    """Whether an instance (known by its proxy credentials) asks for COS of another region with no public IP to
    reach it by. Tencent resolves a bucket host of the instance's own region to a private address and "cross-region
    requests ... will be resolved to a public network address" (realcloud.md §2.1), which an instance without a
    public IP cannot reach. The controller on the host carries no instance's credentials: it reaches every region."""
    rec = metadata.caller(request, cloud)
    return rec is not None and rec.region != region and not rec.internet.get("PublicIpAssigned", False)


def _unlinked(request: web.Request, cloud: Cloud, host: str) -> bool:
    """Whether an instance without a public IP asks for a registry it has no private access to: Docker Hub (only
    Tencent's mirror of it is in reach), or an enterprise registry its VPC is not linked to (ManageInternalEndpoint).
    The personal edition is reachable from any VPC (realcloud.md §5.2)."""
    rec = metadata.caller(request, cloud)
    if rec is None or rec.internet.get("PublicIpAssigned", False) or host in (PERSONAL, DOCKER_HUB_MIRROR):
        return False
    return host == DOCKER_HUB or not cloud.registry.logins.enterprise.reachable_from(host, rec.vpc_id)


def _ours(host: str) -> bool:
    """Whether a proxied request's host is this machine (the endpoint, an instance's loopback address) or one of
    Tencent's API and COS hosts the emulator answers, rather than a host of the internet."""
    return (host in ("localhost", "[::1]") or host.startswith("127.")
            or host.endswith((".tencentcloudapi.com", ".myqcloud.com", ".tencentcos.cn")))


async def api3(request: web.Request, cloud: Cloud) -> web.StreamResponse:
    body = await request.read()
    result = cloud.api_call(request.method, request.raw_path, request.headers, body)
    if result.delay:
        await asyncio.sleep(result.delay)
    if result.drop_response:
        reset_connection(request)
    # Exactly "application/json": with a charset the Python SDK silently ignores errors.
    return web.Response(body=result.body, status=200, headers={"Content-Type": "application/json"})


async def _tick_loop(app: web.Application) -> AsyncIterator[None]:
    cloud = app[CLOUD_KEY]

    async def loop() -> None:
        while True:
            try:
                cloud.tick()
            except Exception:  # a bad tick must not stop time for the whole cloud
                log.exception("tick failed")
            await asyncio.sleep(TICK_SECONDS)

    task = asyncio.create_task(loop())
    yield
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    cloud.close()


@web.middleware
async def no_tunnels(request: web.Request, handler: Handler) -> web.StreamResponse:
    """CONNECT asks the proxy for a tunnel to a host of the internet (https through an instance's HTTPS_PROXY),
    before any route: there is none."""
    if request.method == "CONNECT":
        return mirror.unreachable(request.raw_path.rsplit(":", 1)[0])
    return await handler(request)


def build_app(config: EmulatorConfig) -> web.Application:
    app = web.Application(client_max_size=1024**4, handler_args={"max_field_size": 65536}, middlewares=[no_tunnels])
    app[CLOUD_KEY] = Cloud(config)
    app.router.add_route("*", "/{tail:.*}", front_door)
    app.cleanup_ctx.append(_tick_loop)
    return app


class CannotListen(RuntimeError):
    """The address is taken, not ours to bind, or not an address."""


async def start(config: EmulatorConfig) -> tuple[web.AppRunner, EmulatorConfig]:
    """Start serving; return the runner and the config with the bound port (port 0 picks a free one).

    The socket is bound before the cloud is built: instances are handed the real endpoint."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((config.host, config.port))
    except OSError as exc:
        sock.close()
        raise CannotListen(f"cannot listen on {config.host}:{config.port}: {exc.strerror or exc}") from exc
    sock.listen(1024)
    sock.setblocking(False)
    config = dataclasses.replace(config, port=sock.getsockname()[1])
    runner = web.AppRunner(build_app(config), access_log=None, handle_signals=False)
    await runner.setup()
    await web.SockSite(runner, sock).start()
    return runner, config
