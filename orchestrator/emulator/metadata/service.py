"""The instance metadata service, http://metadata.tencentyun.com (shared/reference/tencent-cloud-api.md §3).

Instances reach it through the proxy in their HTTP_PROXY (runtime/sandbox.py), whose credentials
``<instance-id>:<secret>`` arrive as ``Proxy-Authorization: Basic``: that is how the service knows which
instance asks. Without them, or with wrong ones, every path is 404, as no instance's metadata is visible.

Paths, under the version roots ``latest``, ``1.0`` and ``2017-09-19``: ``user-data`` (the decoded UserData; 404
without one) and ``meta-data/`` with instance-id, instance-name, uuid, local-ipv4, mac, placement/{region,zone},
payment/{charge-type,create-time,termination-time (prepaid only)}, app-id, instance/{instance-type,image-id},
network/interfaces/macs/<mac>/{mac,primary-local-ipv4,vpc-id,subnet-id}, spot/termination-time (only once a
reclaim notice is out), and cam/security-credentials/ (the role name; ``<role>`` gives the STS credential JSON
CVMRoleCredential reads). public-ipv4 is 404: the emulator assigns no public addresses. A directory lists its
children one per line, subdirectories with a trailing "/", without a final newline (CVMRoleCredential takes the
whole body of cam/security-credentials/ as the role name). local-ipv4 is the instance's loopback address: see
cvm/views.py.
Times are UTC+8 ``YYYY-MM-DD HH:MM:SS`` like spot/termination-time.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Union
from urllib.parse import urlsplit

from aiohttp import web

from ..cvm.records import PREPAID, Instance
from ..cvm.times import cst_text, iso_utc

if TYPE_CHECKING:
    from ..cloud import Cloud

VERSIONS = ("1.0", "2017-09-19", "latest")
ROLE_REFRESH_SECONDS = 300.0  # re-issue role credentials with less than 5 minutes left
Node = Union[str, Callable[[], str], "Tree"]
Tree = dict[str, Node]


def _mac(rec: Instance) -> str:
    """A stable, locally administered MAC from the instance's subnet address."""
    octets = [int(o) for o in rec.vpc_ip.split(".")]
    return "52:54:00:" + ":".join(f"{o:02x}" for o in octets[1:])


def _meta_data(cloud: Cloud, rec: Instance) -> Tree:
    mac = _mac(rec)
    tree: Tree = {
        "instance-id": rec.instance_id,
        "instance-name": rec.name,
        "uuid": rec.uuid,
        "local-ipv4": rec.address,
        "mac": mac,
        "app-id": cloud.config.appid,
        "placement": {"region": rec.region, "zone": rec.zone},
        "payment": {"charge-type": rec.charge_type, "create-time": cst_text(rec.created_at)},
        "instance": {"instance-type": rec.instance_type, "image-id": rec.image_id},
        "network": {"interfaces": {"macs": {mac: {
            "mac": mac, "primary-local-ipv4": rec.address, "vpc-id": rec.vpc_id, "subnet-id": rec.subnet_id,
        }}}},
    }
    if rec.charge_type == PREPAID and rec.expired_at is not None:
        payment = tree["payment"]
        assert isinstance(payment, dict)
        payment["termination-time"] = cst_text(rec.expired_at)
    if rec.notice_at is not None and rec.reclaim_at is not None:
        tree["spot"] = {"termination-time": cst_text(rec.reclaim_at)}
    if rec.cam_role:
        tree["cam"] = {"security-credentials": {rec.cam_role: lambda: _role_credential(cloud, rec)}}
    return tree


def _role_credential(cloud: Cloud, rec: Instance) -> str:
    """The STS credential of the instance's CAM role, the same one until it nears its end."""
    now = cloud.clock.now()
    cred = cloud.iam.temporary(rec.role_secret_id) if rec.role_secret_id else None
    if cred is None or cred.expires_at - now < ROLE_REFRESH_SECONDS:
        cred = cloud.iam.issue(cloud.config.role_credential_seconds, now, None, f"role:{rec.instance_id}")
        rec.role_secret_id = cred.secret_id
        cloud.save()
    return json.dumps({
        "TmpSecretId": cred.secret_id,
        "TmpSecretKey": cred.secret_key,
        "ExpiredTime": int(cred.expires_at),
        "Expiration": iso_utc(cred.expires_at),
        "Token": cred.token,
        "Code": "Success",
    })


def caller(request: web.Request, cloud: Cloud) -> Instance | None:
    """The live instance whose proxy credentials the request carries; None for any other caller."""
    scheme, _, encoded = request.headers.get("Proxy-Authorization", "").partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        instance_id, _, secret = base64.b64decode(encoded, validate=True).decode().partition(":")
    except (binascii.Error, UnicodeDecodeError):
        return None
    rec = cloud.cvm.instances.get(instance_id)
    if rec is None or not hmac.compare_digest(rec.secret.encode(), secret.encode()):
        return None
    return rec


def _resolve(tree: Tree, parts: list[str]) -> Node | None:
    node: Node = tree
    for part in parts:
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def _text(body: str) -> web.Response:
    return web.Response(text=body, content_type="text/plain")


async def handle(request: web.Request, cloud: Cloud) -> web.StreamResponse:
    cloud.tick()  # a notice due by now is visible now
    rec = caller(request, cloud)
    if rec is None:
        return web.Response(status=404)
    path = urlsplit(request.raw_path).path
    parts = [p for p in path.split("/") if p]
    if not parts:
        return _text("\n".join(VERSIONS))
    if parts[0] not in VERSIONS:
        return web.Response(status=404)
    user_data = base64.b64decode(rec.user_data) if rec.user_data else None
    if parts[1:] == ["user-data"]:
        return web.Response(body=user_data) if user_data is not None else web.Response(status=404)
    version: Tree = {"meta-data": _meta_data(cloud, rec)}
    if user_data is not None:
        version["user-data"] = ""
    node = _resolve(version, parts[1:])
    if node is None:
        return web.Response(status=404)
    if isinstance(node, dict):
        return _text("\n".join(f"{name}/" if isinstance(child, dict) else name for name, child in node.items()))
    return _text(node if isinstance(node, str) else node())
