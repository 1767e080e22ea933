"""The instance metadata service (shared/reference/tencent-cloud-api.md §3).

Plain urllib, which honours ``HTTP_PROXY``: on the emulator that proxy is how an instance's requests to
``metadata.tencentyun.com`` reach the emulator and say which instance is asking; on Tencent Cloud no proxy is set
and the name resolves inside the VPC. Timeouts are short: the service is local, and the spot-notice poll must
never stall.
"""

from __future__ import annotations

import urllib.error
import urllib.request

METADATA_URL = "http://metadata.tencentyun.com/latest/meta-data/"


class MetadataError(Exception):
    """The service did not answer (as opposed to answering 404: "no such item")."""


class Metadata:
    def __init__(self, base_url: str = METADATA_URL, timeout: float = 2.0) -> None:
        self.base_url = base_url
        self.timeout = timeout
        self._opener = urllib.request.build_opener()

    def get(self, path: str) -> str | None:
        """The item's text, or None when the service says it does not exist (404)."""
        try:
            with self._opener.open(self.base_url + path, timeout=self.timeout) as resp:
                return bytes(resp.read()).decode().strip()
        except urllib.error.HTTPError as exc:
            exc.close()
            if exc.code == 404:
                return None
            raise MetadataError(f"metadata {path}: HTTP {exc.code}") from exc
        except (urllib.error.URLError, OSError) as exc:
            raise MetadataError(f"metadata {path}: {exc}") from exc
