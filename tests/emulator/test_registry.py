"""Tencent Container Registry's personal edition on the emulator (registry/): the Docker Registry HTTP API v2 with
token auth, spoken here through the proxy as a Docker client does. Nothing is readable without the account's
login, and nothing is stored whose bytes do not match its digest."""

from __future__ import annotations

import hashlib
import json

import pytest
import requests

from tests.emulator_process import EmulatorProcess

REGISTRY = "ccr.ccs.tencentyun.com"
PASSWORD = "registry-password"
MANIFEST = "application/vnd.oci.image.manifest.v1+json"


def through(emulator: EmulatorProcess) -> dict[str, str]:
    return {"http": f"http://{emulator.endpoint}"}


def url(path: str) -> str:
    return f"http://{REGISTRY}{path}"


def token(emulator: EmulatorProcess, scope: str, password: str = PASSWORD) -> requests.Response:
    username = emulator.admin.set_registry_password(PASSWORD)
    return requests.get(url("/service/token"), params={"service": REGISTRY, "scope": scope},
                        auth=(username, password), proxies=through(emulator), timeout=10)


def bearer(emulator: EmulatorProcess, repository: str) -> dict[str, str]:
    answer = token(emulator, f"repository:{repository}:pull,push")
    assert answer.status_code == 200, answer.text
    return {"Authorization": f"Bearer {answer.json()['token']}"}


def digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def upload(emulator: EmulatorProcess, headers: dict[str, str], repository: str, data: bytes,
           claimed: str | None = None) -> requests.Response:
    started = requests.post(url(f"/v2/{repository}/blobs/uploads/"), headers=headers, proxies=through(emulator),
                            timeout=10)
    assert started.status_code == 202, started.text
    return requests.put(url(started.headers["Location"]), params={"digest": claimed or digest(data)}, data=data,
                        headers=headers, proxies=through(emulator), timeout=10)


def test_the_api_asks_for_a_token_and_the_token_service_refuses_a_wrong_password(emulator: EmulatorProcess) -> None:
    base = requests.get(url("/v2/"), proxies=through(emulator), timeout=10)
    assert base.status_code == 401
    assert base.headers["WWW-Authenticate"].startswith(f'Bearer realm="http://{REGISTRY}/service/token"')
    refused = token(emulator, "repository:team/train:pull", password="not-the-password")
    assert refused.status_code == 401 and refused.json()["errors"][0]["code"] == "UNAUTHORIZED"
    pulled = requests.get(url("/v2/team/train/manifests/1.0"), proxies=through(emulator), timeout=10)
    assert pulled.status_code == 401 and "repository:team/train:pull" in pulled.headers["WWW-Authenticate"]


def test_an_image_pushed_with_its_digests_is_pulled_back_by_tag_and_by_digest(emulator: EmulatorProcess) -> None:
    headers = bearer(emulator, "team/train")
    layer, config = b"a layer's bytes", b'{"architecture": "amd64", "os": "linux"}'
    for data in (layer, config):
        assert upload(emulator, headers, "team/train", data).status_code == 201
    manifest = json.dumps({"schemaVersion": 2, "mediaType": MANIFEST,
                           "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                                      "digest": digest(config), "size": len(config)},
                           "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar",
                                       "digest": digest(layer), "size": len(layer)}]}).encode()
    put = requests.put(url("/v2/team/train/manifests/1.0"), data=manifest,
                       headers={**headers, "Content-Type": MANIFEST}, proxies=through(emulator), timeout=10)
    assert put.status_code == 201 and put.headers["Docker-Content-Digest"] == digest(manifest)
    for reference in ("1.0", digest(manifest)):
        got = requests.get(url(f"/v2/team/train/manifests/{reference}"), headers=headers, proxies=through(emulator),
                           timeout=10)
        assert got.status_code == 200 and got.content == manifest and got.headers["Content-Type"] == MANIFEST
    blob = requests.get(url(f"/v2/team/train/blobs/{digest(layer)}"), headers=headers, proxies=through(emulator),
                        timeout=10)
    assert blob.content == layer
    missing = requests.get(url("/v2/team/train/manifests/2.0"), headers=headers, proxies=through(emulator),
                           timeout=10)
    assert missing.status_code == 404 and missing.json()["errors"][0]["code"] == "MANIFEST_UNKNOWN"


@pytest.mark.parametrize("case", ["wrong-digest", "unknown-blob", "bad-media-type"])
def test_content_that_does_not_match_its_digest_or_names_a_missing_blob_is_refused(emulator: EmulatorProcess,
                                                                                   case: str) -> None:
    headers = bearer(emulator, "team/train")
    if case == "wrong-digest":
        answer = upload(emulator, headers, "team/train", b"these bytes", claimed=digest(b"other bytes"))
        assert answer.status_code == 400 and answer.json()["errors"][0]["code"] == "DIGEST_INVALID"
        gone = requests.head(url(f"/v2/team/train/blobs/{digest(b'these bytes')}"), headers=headers,
                             proxies=through(emulator), timeout=10)
        assert gone.status_code == 404
        return
    manifest = json.dumps({"schemaVersion": 2, "config": {"digest": digest(b"never uploaded"), "size": 1},
                           "layers": []}).encode()
    media = MANIFEST if case == "unknown-blob" else "text/plain"
    answer = requests.put(url("/v2/team/train/manifests/1.0"), data=manifest,
                          headers={**headers, "Content-Type": media}, proxies=through(emulator), timeout=10)
    expected = "MANIFEST_BLOB_UNKNOWN" if case == "unknown-blob" else "MANIFEST_INVALID"
    assert answer.status_code == 400 and answer.json()["errors"][0]["code"] == expected


def test_a_token_for_one_repository_does_not_open_another(emulator: EmulatorProcess) -> None:
    headers = bearer(emulator, "team/train")
    other = requests.get(url("/v2/team/other/manifests/1.0"), headers=headers, proxies=through(emulator), timeout=10)
    assert other.status_code == 401 and other.json()["errors"][0]["code"] == "DENIED"


DOCKER_HUB, MIRROR = "registry-1.docker.io", "mirror.ccs.tencentyun.com"


def test_docker_hub_serves_anyone_and_tencents_mirror_serves_its_images_but_takes_no_push(
        emulator: EmulatorProcess) -> None:
    username = emulator.admin.set_registry_password(PASSWORD, registry=DOCKER_HUB)
    pushing = requests.get(f"http://{DOCKER_HUB}/service/token", auth=(username, PASSWORD), proxies=through(emulator),
                           params={"service": DOCKER_HUB, "scope": "repository:team/train:pull,push"}, timeout=10)
    headers = {"Authorization": f"Bearer {pushing.json()['token']}"}
    config = b'{"architecture": "amd64", "os": "linux"}'
    started = requests.post(f"http://{DOCKER_HUB}/v2/team/train/blobs/uploads/", headers=headers,
                            proxies=through(emulator), timeout=10)
    assert requests.put(f"http://{DOCKER_HUB}{started.headers['Location']}", params={"digest": digest(config)},
                        data=config, headers=headers, proxies=through(emulator), timeout=10).status_code == 201
    manifest = json.dumps({"schemaVersion": 2, "mediaType": MANIFEST, "layers": [],
                           "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                                      "digest": digest(config), "size": len(config)}}).encode()
    assert requests.put(f"http://{DOCKER_HUB}/v2/team/train/manifests/1.0", data=manifest,
                        headers={**headers, "Content-Type": MANIFEST}, proxies=through(emulator),
                        timeout=10).status_code == 201
    for host in (DOCKER_HUB, MIRROR):  # no login: a pull of Docker Hub needs none, directly or through the mirror
        anonymous = requests.get(f"http://{host}/service/token", params={
            "service": host, "scope": "repository:team/train:pull,push"}, proxies=through(emulator), timeout=10)
        assert anonymous.status_code == 200, anonymous.text
        pull = {"Authorization": f"Bearer {anonymous.json()['token']}"}
        got = requests.get(f"http://{host}/v2/team/train/manifests/1.0", headers=pull, proxies=through(emulator),
                           timeout=10)
        assert got.status_code == 200 and got.content == manifest
        pushed = requests.post(f"http://{host}/v2/team/train/blobs/uploads/", headers=pull,
                               proxies=through(emulator), timeout=10)
        assert pushed.status_code == 401 and pushed.json()["errors"][0]["code"] == "DENIED"
    personal = requests.get(url("/service/token"), params={"service": REGISTRY, "scope": "repository:t/x:pull"},
                            proxies=through(emulator), timeout=10)
    assert personal.status_code == 401  # Tencent's own registries stay private


def test_tencents_mirror_of_docker_hub_takes_no_password(emulator: EmulatorProcess) -> None:
    with pytest.raises(Exception, match="has no logins: its images are Docker Hub's"):
        emulator.admin.set_registry_password(PASSWORD, registry=MIRROR)
