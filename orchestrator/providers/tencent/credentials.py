"""Where the user's Tencent Cloud keys come from, in the SDKs' and tccli's usual order.

1. ``TENCENTCLOUD_SECRET_ID`` / ``TENCENTCLOUD_SECRET_KEY`` (+ ``TENCENTCLOUD_SESSION_TOKEN``),
2. a web identity: ``TENCENTCLOUD_ROLE_ARN`` and an OIDC token (a file, or GitHub Actions'), traded with STS for the
   role's temporary keys (web_identity.py lists its variables),
3. the SDK profile file ``~/.tencentcloud/credentials`` (``[default]`` section, ``secret_id`` / ``secret_key``;
   ``TENCENTCLOUD_PROFILE`` picks another section),
4. tccli's ``~/.tccli/<profile>.credential`` (JSON ``secretId`` / ``secretKey``),
5. on a Tencent Cloud CVM (its DMI vendor says so), the CAM role bound to the instance.
Keys are read when needed and never written anywhere by cvmjob.
"""

from __future__ import annotations

import configparser
import functools
import json
import os
from dataclasses import dataclass
from pathlib import Path

from . import web_identity
from .keys import CredentialSource, StaticCredential

DMI_VENDOR = Path("/sys/class/dmi/id/sys_vendor")


@dataclass(frozen=True)
class FoundCredential:
    credential: CredentialSource
    source: str


def looked_for() -> str:
    """Every place find_user_credential() looks for keys, in its order: what an error about missing keys names."""
    profile = os.environ.get("TENCENTCLOUD_PROFILE", "default")
    return (
        "TENCENTCLOUD_SECRET_ID/TENCENTCLOUD_SECRET_KEY, a web identity (TENCENTCLOUD_ROLE_ARN with "
        "TENCENTCLOUD_OIDC_PROVIDER_ID and a token: TENCENTCLOUD_WEB_IDENTITY_TOKEN_FILE or GitHub Actions' "
        f"id-token), ~/.tencentcloud/credentials [{profile}], ~/.tccli/{profile}.credential, "
        "the CAM role of a Tencent Cloud CVM"
    )


def find_user_credential(home: Path | None = None, *, endpoint: str | None = None) -> FoundCredential | None:
    """The first source of keys configured. ``endpoint``: the emulator (``host:port``) the keys are for, None for
    Tencent Cloud; a web identity trades its token with that cloud's STS."""
    env = os.environ
    if env.get("TENCENTCLOUD_SECRET_ID") and env.get("TENCENTCLOUD_SECRET_KEY"):
        return FoundCredential(
            StaticCredential(
                env["TENCENTCLOUD_SECRET_ID"],
                env["TENCENTCLOUD_SECRET_KEY"],
                env.get("TENCENTCLOUD_SESSION_TOKEN") or None,
            ),
            "environment (TENCENTCLOUD_SECRET_ID)",
        )
    web = web_identity.from_environment(env)
    if web is not None:
        return FoundCredential(_web_credential(web, endpoint), web.describe())
    home = home or Path.home()
    profile = env.get("TENCENTCLOUD_PROFILE", "default")
    ini = home / ".tencentcloud" / "credentials"
    if ini.is_file():
        parser = configparser.ConfigParser()
        parser.read(ini)
        if parser.has_section(profile):
            section = parser[profile]
            if section.get("secret_id") and section.get("secret_key"):
                return FoundCredential(
                    StaticCredential(section["secret_id"], section["secret_key"]), f"{ini} [{profile}]"
                )
    tccli = home / ".tccli" / f"{profile}.credential"
    if tccli.is_file():
        data = json.loads(tccli.read_text())
        if data.get("secretId") and data.get("secretKey"):
            return FoundCredential(StaticCredential(data["secretId"], data["secretKey"]), str(tccli))
    if _on_tencent_cvm():
        from ._sdk import cvm_role_credential  # only on a CVM (the package's note)

        role = cvm_role_credential()
        if role is not None:
            return FoundCredential(role, "the CAM role of this CVM")
    return None


@functools.cache
def _web_credential(web: web_identity.WebIdentityConfig, endpoint: str | None) -> CredentialSource:
    """One refreshing credential per configuration and cloud for the process: every connect() (each `logs -f`
    poll, each status read) trading a new token with STS (20 calls/s for the account) and GitHub was waste."""
    return web.credential(endpoint)


def _on_tencent_cvm() -> bool:
    """Only a Tencent Cloud instance asks the metadata service (elsewhere its name may take long to fail)."""
    try:
        return "tencent" in DMI_VENDOR.read_text().lower()
    except OSError:
        return False
