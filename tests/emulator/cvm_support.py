"""Helpers for the CVM, instance, metadata and spot tests: official-SDK calls with sensible defaults, polling."""

from __future__ import annotations

import base64
import json
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import pytest
from tencentcloud.common.exception.tencent_cloud_sdk_exception import TencentCloudSDKException
from tencentcloud.cvm.v20170312 import models

from tests.emulator_process import EmulatorProcess
from tests.waiting import wait_until

T = TypeVar("T")

ZONE = "ap-guangzhou-3"
IMAGE = "img-487zeit5"
SMALL = "S5.MEDIUM4"
SPOT_TYPE = "GN7.2XLARGE32"


def call(client: Any, action: str, params: dict[str, Any] | None = None) -> Any:
    """A typed SDK call: the request model filled from ``params``, the response model back."""
    request = getattr(models, f"{action}Request")()
    request.from_json_string(json.dumps(params or {}))
    return getattr(client, action)(request)


@contextmanager
def api_error(code: str) -> Iterator[None]:
    with pytest.raises(TencentCloudSDKException) as err:
        yield
    assert err.value.code == code, err.value


def hpc_cluster(client: Any, zone: str, name: str = "cluster") -> str:
    """A new HPC cluster of ``zone``: the only place an HCC type can be bought into."""
    (cluster,) = call(client, "CreateHpcCluster", {"Zone": zone, "Name": name}).HpcClusterSet
    return str(cluster.HpcClusterId)


def launch_params(**overrides: Any) -> dict[str, Any]:
    params: dict[str, Any] = {"Placement": {"Zone": ZONE}, "ImageId": IMAGE, "InstanceType": SMALL}
    params.update(overrides)
    return params


def run(client: Any, **overrides: Any) -> list[str]:
    return list(call(client, "RunInstances", launch_params(**overrides)).InstanceIdSet)


def run_one(client: Any, **overrides: Any) -> str:
    (instance_id,) = run(client, **overrides)
    return instance_id


def user_data(script: str) -> str:
    return base64.b64encode(script.encode()).decode()


def describe(client: Any, *instance_ids: str) -> list[Any]:
    return list(call(client, "DescribeInstances", {"InstanceIds": list(instance_ids)}).InstanceSet)


def state_of(client: Any, instance_id: str) -> str | None:
    found = describe(client, instance_id)
    return found[0].InstanceState if found else None


def wait_for(check: Callable[[], T | None], timeout: float = 10.0, what: str = "condition") -> T:
    return wait_until(what, check, timeout, poll=0.05)


def wait_state(client: Any, instance_id: str, state: str | None, timeout: float = 10.0) -> None:
    """Until DescribeInstances shows ``state`` (None: the instance is gone)."""
    wait_for(lambda: state_of(client, instance_id) == state, timeout, f"{instance_id} to be {state}")


def boot(emulator: EmulatorProcess, client: Any, instance_id: str) -> None:
    """Jump the cloud clock over PENDING instead of waiting for it."""
    emulator.admin.advance(1)
    wait_state(client, instance_id, "RUNNING")


def admin_instance(emulator: EmulatorProcess, instance_id: str) -> dict[str, Any]:
    return next(i for i in emulator.admin.instances() if i["instance_id"] == instance_id)


def wait_file(path: Path, timeout: float = 10.0) -> str:
    """The file's text once it exists and is not empty (written by an instance's process)."""
    return wait_for(lambda: path.read_text() if path.exists() and path.stat().st_size else None, timeout, str(path))


def metadata(emulator: EmulatorProcess, instance: dict[str, Any] | None, path: str) -> tuple[int, str]:
    """GET a metadata path the way an instance does: through the emulator as its HTTP proxy, with the
    instance's proxy credentials (``instance``: its admin record; None: no credentials)."""
    url = f"http://metadata.tencentyun.com{path}"
    proxy = instance["proxy"] if instance is not None else f"http://{emulator.endpoint}"
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({"http": proxy}))
    try:
        with opener.open(url, timeout=10) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, ""
