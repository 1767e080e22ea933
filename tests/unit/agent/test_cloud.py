"""Credentials that renew themselves, and what the agent does to its proxy settings."""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from orchestrator.agent import cloud
from orchestrator.agent.cloud import RoleKeys, StsKeys, bypass_proxy_for
from orchestrator.contract import AgentConfig, CosAccess, CredentialsDoc, Location, RegistryToken, TemporaryKeys
from orchestrator.providers.tencent import RefreshingCredential


def keys(n: int, expires_at: float) -> TemporaryKeys:
    return TemporaryKeys(secret_id=f"AKID{n}", secret_key=f"key{n}", token=f"token{n}", expires_at=int(expires_at))


def registry(n: int, expires_at: float) -> RegistryToken:
    return RegistryToken(registry="team.tencentcloudcr.com", username="100000000001", token=f"tcr{n}",
                         expires_at=int(expires_at))


@pytest.fixture
def credentials_server() -> Iterator[tuple[str, list[TemporaryKeys | None]]]:
    """Serves credentials.json as a presigned URL would; the test sets what it holds (None: a 503), with a
    registry token that expires with the keys."""
    held: list[TemporaryKeys | None] = [None]

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            doc = held[0]
            if doc is None:
                self.send_response(503)
                self.end_headers()
                return
            number = int(doc.secret_id.removeprefix("AKID"))
            body = CredentialsDoc(keys=doc, registry=registry(number, doc.expires_at)).model_dump_json().encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}/cvmjob/j/attempts/1/credentials.json?sign=x", held
    server.shutdown()
    server.server_close()


def test_sts_keys_start_from_agent_json_and_renew_from_the_credentials_url(
        credentials_server: tuple[str, list[TemporaryKeys | None]], monkeypatch: pytest.MonkeyPatch) -> None:
    url, held = credentials_server
    monkeypatch.setattr(cloud, "_REFETCH_SECONDS", 0.0)
    cred = RefreshingCredential(StsKeys(keys(1, time.time() + 60), url), margin_seconds=300)
    assert cred.get_credential_info() == ("AKID1", "key1", "token1")  # near expiry: the URL is tried, 503: kept
    held[0] = keys(2, time.time() + 7200)
    assert cred.get_credential_info() == ("AKID2", "key2", "token2")
    held[0] = keys(3, time.time() + 7200)
    assert cred.secret_id == "AKID2"  # fresh for two hours: no fetch


def test_the_registry_token_is_agent_jsons_while_it_lasts_then_the_controllers_latest(
        credentials_server: tuple[str, list[TemporaryKeys | None]]) -> None:
    url, held = credentials_server
    now = time.time()
    where = Location(bucket="cvmjob-ap-guangzhou-1250000000", prefix="cvmjob/j/")
    cfg = AgentConfig(job_id="j", job_name="j", attempt=1, node_rank=0, nnodes=1, state=where, checkpoints=where,
                      outputs=where, cos=CosAccess(region="ap-guangzhou", appid="1250000000"), spec={},
                      keys=keys(1, now + 3600), credentials_url=url, registry=registry(1, now + 3600))
    assert cloud.registry_token(cfg, now) == cfg.registry  # an hour left: no fetch
    late = now + 3300  # ten minutes left is too little for a pull
    assert cloud.registry_token(cfg, late) == cfg.registry  # the URL answers 503: the one there is
    held[0] = keys(2, now + 7200)
    token = cloud.registry_token(cfg, late)
    assert token is not None and token.token == "tcr2"
    assert "tcr1" not in repr(cfg)  # a token is never in a repr, a log line or a traceback
    assert cloud.registry_token(cfg.model_copy(update={"registry": None}), now) is None


def test_role_keys_come_from_the_metadata_service() -> None:
    class Metadata:
        def get(self, path: str) -> str | None:
            if path == "cam/security-credentials/":
                return "cvmjob-train"
            assert path == "cam/security-credentials/cvmjob-train"
            return json.dumps({"TmpSecretId": "AKIDr", "TmpSecretKey": "k", "Token": "t",
                               "ExpiredTime": int(time.time()) + 7200, "Code": "Success"})

    cred = RefreshingCredential(RoleKeys(Metadata(), None))  # type: ignore[arg-type]
    assert cred.get_credential_info() == ("AKIDr", "k", "t")


def test_the_cos_endpoint_bypasses_the_instance_proxy_in_both_forms(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NO_PROXY", "example.com")
    monkeypatch.delenv("no_proxy", raising=False)
    bypass_proxy_for("127.0.0.1:9000")
    bypass_proxy_for("127.0.0.1:9000")
    assert os.environ["NO_PROXY"] == "example.com,127.0.0.1,127.0.0.1:9000"
    assert os.environ["no_proxy"] == "127.0.0.1,127.0.0.1:9000"


@pytest.mark.parametrize(("gbps", "ranges"), [(None, 8), (1.5, 8), (5.0, 13), (10.0, 25), (12.8, 32), (100.0, 32)])
def test_large_files_keep_about_a_request_in_flight_per_link_share_within_bounds(gbps: float | None,
                                                                                  ranges: int) -> None:
    assert cloud.ranges_in_flight(gbps) == ranges
