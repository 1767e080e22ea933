"""An OIDC issuer of the tests' own: an RSA key, its JWKS, and the tokens it signs, set up on an emulator as a CAM
identity provider with a role that trusts it (as GitHub's issuer and a CI role would be)."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import jwt
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm

from tests.emulator_process import EmulatorProcess

GITHUB_ISSUER = "https://token.actions.githubusercontent.com"
AUDIENCE = "sts.tencentcloudapi.com"
PROVIDER_ID = "github"
ROLE_NAME = "cvmjob-ci"
SUBJECT = "repo:example/models:ref:refs/heads/main"
RUNNER_BEARER = "runner-secret"  # the runner's ACTIONS_ID_TOKEN_REQUEST_TOKEN


class Issuer:
    def __init__(self, url: str = GITHUB_ISSUER, kid: str = "key-1") -> None:
        self.url = url
        self.kid = kid
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)

    def jwks(self) -> dict[str, Any]:
        jwk = RSAAlgorithm.to_jwk(self.key.public_key(), as_dict=True)
        return {"keys": [{**jwk, "kid": self.kid, "use": "sig", "alg": "RS256"}]}

    def token(self, now: float, lifetime: float = 300, **claims: Any) -> str:
        """A token issued at ``now``; a claim given as None is left out."""
        payload = {"iss": self.url, "aud": AUDIENCE, "sub": SUBJECT, "iat": int(now), "nbf": int(now),
                   "exp": int(now + lifetime), **claims}
        return jwt.encode(
            {k: v for k, v in payload.items() if v is not None}, self.key, algorithm="RS256", headers={"kid": self.kid}
        )


def role_policy(emulator: EmulatorProcess) -> dict[str, Any]:
    """What the CI role may do: read the balance, nothing else of API 3.0, and objects under ci/ of the bucket."""
    bucket = f"cvmjob-test-{emulator.appid}"  # tests/emulator/conftest.py's bucket
    objects = f"qcs::cos:ap-guangzhou:uid/{emulator.appid}:{bucket}/ci/*"
    return {
        "version": "2.0",
        "statement": [
            {"effect": "allow", "action": ["name/billing:DescribeAccountBalance"], "resource": ["*"]},
            {"effect": "allow", "action": ["name/cos:PutObject", "name/cos:GetObject"], "resource": [objects]},
        ],
    }


def configure(emulator: EmulatorProcess, issuer: Issuer, policy: dict[str, Any] | None = None) -> str:
    """The provider and the role (with ``policy``, by default role_policy's) on the emulator; returns the role's
    ARN."""
    emulator.admin.add_oidc_provider(PROVIDER_ID, issuer.url, [AUDIENCE], issuer.jwks())
    return emulator.admin.add_role(ROLE_NAME, policy or role_policy(emulator), issuer.url, subject="repo:example/*")


@contextmanager
def github_token_endpoint(issuer: Issuer, now: Callable[[], float]) -> Iterator[tuple[str, list[dict[str, str]]]]:
    """GitHub's ID token endpoint: answers a token issued at ``now()`` for the audience asked, to the runner's
    bearer token only. Yields its ACTIONS_ID_TOKEN_REQUEST_URL and the requests it saw (header and query)."""
    seen: list[dict[str, str]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            query = {k: v[0] for k, v in parse_qs(urlsplit(self.path).query).items()}
            seen.append({"authorization": self.headers.get("Authorization", ""), **query})
            if self.headers.get("Authorization") != f"bearer {RUNNER_BEARER}":
                self.send_response(401)
                self.end_headers()
                return
            body = json.dumps({"count": 1, "value": issuer.token(now(), aud=query["audience"])})
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body.encode())

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/_apis/token?api-version=2.0", seen
    finally:
        server.shutdown()
        server.server_close()
