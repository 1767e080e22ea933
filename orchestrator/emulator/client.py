"""A small client for the admin API, for tests, benchmarks and the embedded mode. It needs the emulator's own
SecretKey (keys.py: ``<state-dir>/secret_key`` unless it was given one)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any


class AdminError(RuntimeError):
    """An admin call the emulator refused: ``detail`` is its ``error`` message (the whole body if it has none)."""

    def __init__(self, message: str, status: int, detail: str) -> None:
        super().__init__(message)
        self.status = status
        self.detail = detail


class AdminClient:
    def __init__(self, endpoint: str, secret_key: str, timeout: float = 30.0) -> None:
        self.base = endpoint if endpoint.startswith("http") else f"http://{endpoint}"
        self._secret_key = secret_key
        self._timeout = timeout
        # Never through a proxy: the admin API is on loopback, and HTTP_PROXY may point at the emulator itself.
        self._opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(
            f"{self.base}/_emulator/{path}",
            data=data,
            method=method,
            headers={"Authorization": f"Bearer {self._secret_key}", "Content-Type": "application/json"},
        )
        try:
            with self._opener.open(req, timeout=self._timeout) as resp:
                return json.loads(resp.read())
        except urllib.error.HTTPError as exc:
            text = exc.read().decode(errors="replace")
            raise AdminError(f"{method} {path}: {exc.code} {text}", exc.code, _error_of(text)) from exc

    def health(self) -> dict[str, Any]:
        return dict(self._call("GET", "health"))

    def reset(self, seed: int | None = None) -> None:
        self._call("POST", "reset", {"seed": seed})

    def now(self) -> float:
        return float(self._call("GET", "clock")["now"])

    def advance(self, seconds: float) -> float:
        return float(self._call("POST", "clock/advance", {"seconds": seconds})["now"])

    def inject(self, kind: str, *, service: str = "*", action: str = "*", **spec: Any) -> int:
        """An API 3.0 fault: kind "error" (code, message), "latency" (seconds) or "drop_response";
        fires ``count`` times (default 1, None = always) with ``probability``."""
        return int(self._call("POST", "faults/api", {"kind": kind, "service": service, "action": action, **spec})["id"])

    def inject_cos(self, kind: str, **spec: Any) -> int:
        """A COS fault: kind "error" (status, code), "slow_body" (bytes_per_second) or "reset_body"
        (after_bytes), matched by operation, bucket and key_prefix."""
        return int(self._call("POST", "faults/cos", {"kind": kind, **spec})["id"])

    def clear_faults(self) -> None:
        self._call("DELETE", "faults")

    def faults(self) -> dict[str, Any]:
        return dict(self._call("GET", "faults"))

    def set_rate_limit(self, key: str, per_second: float | None) -> None:
        """key "cvm:RunInstances", or "*" for the default of every action; None removes the limit."""
        self._call("PUT", "rate-limits", {"key": key, "per_second": per_second})

    def calls(
        self, service: str | None = None, action: str | None = None, since: int | None = None
    ) -> list[dict[str, Any]]:
        """The API 3.0 call log (the last 10 000), each call numbered by ``seq``; ``since``: only those after it."""
        query = "&".join(
            f"{k}={v}" for k, v in (("service", service), ("action", action), ("since", since)) if v is not None
        )
        return list(self._call("GET", "calls" + (f"?{query}" if query else "")))

    def cos_requests(self, bucket: str | None = None) -> dict[str, int]:
        """COS requests since the start or the last reset, by operation (``GetBucket``: a listing); ``bucket``:
        only those to that bucket (its full name, ``<name>-<appid>``)."""
        rows = self._call("GET", "cos-requests" + (f"?bucket={bucket}" if bucket else ""))
        counts: dict[str, int] = {}
        for row in rows:
            counts[row["action"]] = counts.get(row["action"], 0) + int(row["count"])
        return counts

    def settings(self) -> dict[str, Any]:
        return dict(self._call("GET", "settings"))

    def set_run_user_data(self, run: bool) -> dict[str, Any]:
        """False: the load-test mode, in which instances boot (PENDING -> RUNNING, billed, reclaimed, terminated)
        without running their UserData or any other process; True: normal boots again. Applies to boots after
        the call."""
        return dict(self._call("PUT", "settings", {"run_user_data": run}))

    def instances(self, processes: bool = True) -> list[dict[str, Any]]:
        """Every instance the account had; ``processes=False``: without their processes (pid, pgid, alive None),
        which spares the emulator a pass over /proc, for a caller that polls states and tags."""
        return list(self._call("GET", "instances" + ("" if processes else "?processes=false")))

    def reclaim(self, instance_id: str, notice_seconds: float | None = 120.0) -> dict[str, Any]:
        """Reclaim a spot instance: the notice appears now, the instance dies notice_seconds later
        (None: no notice, it dies at once)."""
        return dict(self._call("POST", "spot/reclaim", {"instance_id": instance_id, "notice_seconds": notice_seconds}))

    def set_stock(self, zone: str, instance_type: str, charge_type: str, count: int) -> dict[str, Any]:
        return dict(
            self._call(
                "PUT",
                "stock",
                {"zone": zone, "instance_type": instance_type, "charge_type": charge_type, "count": count},
            )
        )

    def set_spot_quota(self, spot_vcpus: int | None, zone: str | None = None) -> dict[str, int]:
        """The spot quota (vCPU cores) of ``zone`` (None: of every zone) from now on, as a ticket to Tencent sets it;
        ``spot_vcpus`` None: the default (50). Returns {zone: spot_vcpus} of the zones set."""
        body: dict[str, Any] = {"spot_vcpus": spot_vcpus}
        if zone is not None:
            body["zone"] = zone
        return dict(self._call("PUT", "quota", body)["spot_vcpus"])

    def set_registry_password(self, password: str, registry: str | None = None) -> str:
        """The account's registry password, as the console sets it (the personal edition's by default); returns
        the login's username (the account's UIN)."""
        body = {"password": password, **({} if registry is None else {"registry": registry})}
        return str(self._call("PUT", "registry/password", body)["username"])

    def add_tcr_instance(self, name: str, region: str | None = None) -> dict[str, str]:
        """A Tencent Container Registry enterprise instance, as the console buys one: its registry_id, its domain
        (<name>.tencentcloudcr.com) and region. Logins to it are CreateInstanceToken's tokens."""
        body = {"name": name, **({} if region is None else {"region": region})}
        return dict(self._call("POST", "registry/instances", body))

    def set_account_policy(self, policy: dict[str, Any] | None) -> dict[str, Any] | None:
        """Narrow the account's long-term key to a CAM policy, as a sub-account's key is (the temporary keys it
        issues later are bound by it too); None: the root account's full rights again. Returns the policy in force."""
        answer = self._call("PUT", "cam/policy", {"policy": policy})["policy"]
        return None if answer is None else dict(answer)

    def add_launch_failures(self, count: int = 1, message: str = "", **match: str) -> dict[str, Any]:
        """The next ``count`` launches matching zone / instance_type / charge_type end LAUNCH_FAILED."""
        return dict(self._call("POST", "launch-failures", {"count": count, "message": message, **match}))

    def add_image_faults(self, kind: str, count: int = 1) -> int:
        """The next ``count`` CreateImage captures "fail" (CREATEFAILED) or "hang" (CREATING until
        clear_faults)."""
        return int(self._call("POST", "image-faults", {"kind": kind, "count": count})["pending"])

    def billing(self) -> dict[str, Any]:
        return dict(self._call("GET", "billing"))

    def set_balance(self, cash_fen: int) -> dict[str, int]:
        """The account's cash balance from now on, in 分; returns the balance as DescribeAccountBalance will add
        it up (cash, frozen, real, consumed)."""
        return dict(self._call("PUT", "billing/balance", {"cash_fen": cash_fen}))

    def expire_credentials(self) -> int:
        return int(self._call("POST", "credentials/expire")["expired"])

    def add_oidc_provider(self, provider_id: str, issuer: str, client_ids: list[str], jwks: dict[str, Any]) -> None:
        """A CAM OIDC identity provider: tokens of ``issuer`` signed by a key of ``jwks`` (a static copy, as CAM
        keeps it) for one of ``client_ids`` (their ``aud``). The same id again replaces it."""
        body = {"provider_id": provider_id, "issuer": issuer, "client_ids": client_ids, "jwks": jwks}
        self._call("POST", "oidc-providers", body)

    def add_role(self, name: str, policy: dict[str, Any], issuer: str, subject: str | None = None) -> str:
        """A role for AssumeRoleWithWebIdentity: it trusts tokens whose ``iss`` is ``issuer`` (and whose ``sub``
        matches the ``subject`` pattern), and its keys may do what ``policy`` allows. Returns its RoleArn."""
        body = {"name": name, "policy": policy, "issuer": issuer, "subject": subject}
        return str(self._call("POST", "roles", body)["arn"])

    def seed(
        self, bucket: str, prefix: str, folder: str | Path, only_if_empty: bool = True, region: str | None = None
    ) -> dict[str, Any]:
        """Copy every file under ``folder`` (absolute, on the emulator's machine) into ``bucket`` as
        ``prefix + relative path``, creating the bucket (in ``region``, default ap-guangzhou) if missing; with
        ``only_if_empty`` nothing is copied when the prefix holds an object already. Returns {bucket, prefix,
        files, bytes, skipped}."""
        body: dict[str, Any] = {
            "bucket": bucket, "prefix": prefix, "folder": str(folder), "only_if_empty": only_if_empty,
        }
        if region is not None:
            body["region"] = region
        return dict(self._call("POST", "seed", body))


def _error_of(text: str) -> str:
    try:
        answer = json.loads(text)
    except ValueError:
        return text
    return str(answer["error"]) if isinstance(answer, dict) and "error" in answer else text
