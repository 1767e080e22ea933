"""The admin API's own edges: what it answers a request it cannot use (it once answered HTTP 500 to a body that
was not JSON), and the COS request counts it keeps."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest

from orchestrator.emulator.admin.routes import PREFIX
from tests.emulator.conftest import make_cos
from tests.emulator_process import EmulatorProcess


def _post(emulator: EmulatorProcess, path: str, body: bytes) -> tuple[int, dict[str, str]]:
    request = urllib.request.Request(f"http://{emulator.endpoint}{PREFIX}{path}", data=body, method="POST",
                                     headers={"Authorization": f"Bearer {emulator.secret_key}",
                                              "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as refused:
        return refused.code, json.loads(refused.read())


@pytest.mark.parametrize(("body", "says"), [(b"{not json", "not JSON"), (b"[1, 2]", "of type list"),
                                            (b'"seed"', "of type str")])
def test_a_body_that_is_not_a_json_object_is_a_bad_request(emulator: EmulatorProcess, body: bytes,
                                                           says: str) -> None:
    status, answer = _post(emulator, "faults/api", body)
    assert status == 400 and says in answer["error"], (status, answer)


def test_cos_requests_are_counted_by_bucket_and_operation(emulator: EmulatorProcess) -> None:
    cos = make_cos(emulator)
    bucket = f"counted-{emulator.appid}"
    cos.create_bucket(Bucket=bucket)
    before = emulator.admin.cos_requests(bucket)
    for _ in range(3):
        cos.list_objects(Bucket=bucket, Prefix="x/")
    cos.put_object(Bucket=bucket, Key="x/a", Body=b"a")
    after = emulator.admin.cos_requests(bucket)
    assert after.get("GetBucket", 0) - before.get("GetBucket", 0) == 3
    assert after.get("PutObject", 0) - before.get("PutObject", 0) == 1
    assert emulator.admin.cos_requests("no-such-bucket-1250000000") == {}
