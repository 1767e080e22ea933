"""Which cloud a job runs on, and how to reach it.

Order: ``--emulator`` (or ``CVMJOB_EMULATOR=1``) → the embedded local emulator; ``CVMJOB_ENDPOINT=host:port`` → an
emulator already running there; Tencent Cloud credentials in the usual places → Tencent Cloud; nothing → the
embedded local emulator, said plainly, except under CI (``CI`` set, as CI systems set it), where nothing is an
error: a CI job whose secrets are missing must fail, not "succeed" on a local emulator. The target is stored with
the job without any secret; keys are found again whenever the job is driven.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Literal

from ..emulator.config import DEFAULT_APPID, DEFAULT_SECRET_ID
from ..errors import EXIT_CLOUD_ERROR, CvmjobError
from ..providers.tencent import CredentialSource, RefreshingCredential, StaticCredential
from ..providers.tencent.credentials import find_user_credential, looked_for
from . import embedded

if TYPE_CHECKING:
    from ..providers.tencent import TencentSdk


class TargetError(CvmjobError):
    """No usable cloud: missing credentials or APPID, with what to do about it."""

    exit_code = EXIT_CLOUD_ERROR


@dataclass(frozen=True)
class Target:
    kind: Literal["tencent", "emulator"]
    region: str
    appid: str
    endpoint: str | None = None  # host:port of an emulator; None for Tencent Cloud
    embedded: bool = False  # the emulator is cvmjob's own (started and stopped by it)
    credential_source: str = ""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Target:
        return cls(**data)

    def describe(self) -> str:
        if self.kind == "tencent":
            return f"Tencent Cloud, {self.region} (keys from {self.credential_source})"
        where = "the embedded local emulator" if self.embedded else "a local emulator"
        return f"{where} at {self.endpoint} (no real cloud: nothing is billed)"


def in_ci() -> bool:
    """Whether a CI system runs us: GitHub Actions, GitLab and most others set CI=true. Any other value but an
    explicit no counts, since the refusal it brings is loud and ``--emulator`` is the way past it."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no", "off")


def _emulator_asked(force_emulator: bool) -> bool:
    return force_emulator or os.environ.get("CVMJOB_EMULATOR") == "1"


def refuse_silent_emulator(force_emulator: bool = False) -> None:
    """Under CI, the TargetError resolve() raises when no cloud was chosen and no keys are found. Starts and
    connects nothing, so that a command recording something before its first resolve() (a sweep's study) can
    refuse first."""
    if not in_ci() or _emulator_asked(force_emulator) or os.environ.get("CVMJOB_ENDPOINT"):
        return
    if find_user_credential() is None:
        raise TargetError(
            f"CI is set and no Tencent Cloud credentials were found (looked for {looked_for()}): in CI cvmjob does "
            "not fall back to the local emulator. Give the CI job its keys, or pass --emulator (or set "
            "CVMJOB_EMULATOR=1) to run on the local emulator on purpose."
        )


def resolve(region: str, force_emulator: bool = False) -> Target:
    if _emulator_asked(force_emulator):
        return _embedded(region)
    endpoint = os.environ.get("CVMJOB_ENDPOINT")
    if endpoint:
        found = find_user_credential(endpoint=endpoint)
        return Target(
            "emulator",
            region,
            os.environ.get("TENCENTCLOUD_APPID", DEFAULT_APPID),
            endpoint,
            credential_source=found.source if found else "the emulator's default keys",
        )
    found = find_user_credential()
    if found is None:
        refuse_silent_emulator()
        return _embedded(region)
    appid = os.environ.get("TENCENTCLOUD_APPID", "")
    if not appid.isdigit():
        raise TargetError(
            "Tencent Cloud keys were found but not the account's APPID, which COS bucket names need: "
            "set TENCENTCLOUD_APPID (console → Account Info → APPID)."
        )
    return Target("tencent", region, appid, credential_source=found.source)


def _embedded(region: str) -> Target:
    emulator = embedded.ensure_running()
    return Target(
        "emulator",
        region,
        DEFAULT_APPID,
        emulator.endpoint,
        embedded=True,
        credential_source="the emulator's default keys",
    )


def reconnect(target: Target) -> Target:
    """The same target for a job being resumed: the embedded emulator is started again if it is down (its state
    directory keeps the instances' records)."""
    if target.embedded:
        return _embedded(target.region)
    return target


def connect(target: Target) -> TencentSdk:
    from ..providers.tencent import TencentSdk  # the SDKs, for the processes that call the cloud (the package's note)

    found = find_user_credential(endpoint=target.endpoint)
    if target.kind == "tencent":
        if found is None:
            raise TargetError(f"no Tencent Cloud keys: looked for {looked_for()}")
        return TencentSdk(found.credential, target.region, None, target.appid)
    credential: CredentialSource
    if target.embedded:  # its own key, in its state directory (no emulator has a public one)
        credential = StaticCredential(DEFAULT_SECRET_ID, embedded.secret_key())
    elif found is not None:
        credential = found.credential
    else:  # said at the first call, not here: driving an ended job again needs no cloud, nor keys
        credential = RefreshingCredential(lambda: _no_keys(target.endpoint), lazy=True)
    return TencentSdk(credential, target.region, target.endpoint, target.appid)


def _no_keys(endpoint: str | None) -> tuple[StaticCredential, float]:
    raise TargetError(
        f"no keys for the emulator at {endpoint}: set TENCENTCLOUD_SECRET_ID and TENCENTCLOUD_SECRET_KEY to its "
        "keys (its SecretKey is in the file `secret_key` of its --state-dir, unless it was started with yours)"
    )
