"""Where the user's Tencent Cloud keys come from, in the SDKs' and tccli's usual order.

1. ``TENCENTCLOUD_SECRET_ID`` / ``TENCENTCLOUD_SECRET_KEY`` (+ ``TENCENTCLOUD_SESSION_TOKEN``),
2. the SDK profile file ``~/.tencentcloud/credentials`` (``[default]`` section, ``secret_id`` / ``secret_key``;
   ``TENCENTCLOUD_PROFILE`` picks another section),
3. tccli's ``~/.tccli/<profile>.credential`` (JSON ``secretId`` / ``secretKey``),
4. on a Tencent Cloud CVM (its DMI vendor says so), the CAM role bound to the instance.
Keys are read when needed and never written anywhere by cvmjob.
"""

from __future__ import annotations

import configparser
import json
import os
from dataclasses import dataclass
from pathlib import Path

from ._sdk import cvm_role_credential
from .keys import CredentialSource, StaticCredential

DMI_VENDOR = Path("/sys/class/dmi/id/sys_vendor")


@dataclass(frozen=True)
class FoundCredential:
    credential: CredentialSource
    source: str


def find_user_credential(home: Path | None = None) -> FoundCredential | None:
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
        role = cvm_role_credential()
        if role is not None:
            return FoundCredential(role, "the CAM role of this CVM")
    return None


def _on_tencent_cvm() -> bool:
    """Only a Tencent Cloud instance asks the metadata service (elsewhere its name may take long to fail)."""
    try:
        return "tencent" in DMI_VENDOR.read_text().lower()
    except OSError:
        return False
