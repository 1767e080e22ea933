"""Tencent's software mirror as an instance without a public IP sees it, http://mirrors.tencentyun.com
(docs/emulator.md, "Network"), and the refusal of every other host on the internet.

Served: ``/install/GPU/auto_install.sh``, the GPU driver's auto-install (the API's stand-in for the console's
"install the GPU driver automatically", doc 560/112129), and ``/pypi/simple/``, a package index that holds
nothing (no traffic leaves loopback: what an emulated job needs must be in the image, the emulator's interpreter).

The installer reads DRIVER_VERSION from ``user_define_install_info.ini`` in the temporary folder, as Tencent's
does, and fails without it; after ``driver_install_seconds`` it puts the driver's ``nvidia-smi`` into the
instance's /usr/bin. No public image has it before (a GPU instance boots without a driver), and a custom image
made of an instance that installed it keeps it. That nvidia-smi is the machine's own for the GPUs the emulator
lent the instance (runtime/gpus.py) and, with none lent, a driver that sees no GPU.
"""

from __future__ import annotations

import shlex
import shutil

from aiohttp import web

HOST = "mirrors.tencentyun.com"
INSTALLER = "/install/GPU/auto_install.sh"
PYPI = "/pypi/simple/"

_INSTALLER = """#!/bin/bash
# The local Tencent Cloud's GPU driver auto-install (orchestrator/emulator/mirror.py).
set -eu
ini="${{TMPDIR:-/tmp}}/user_define_install_info.ini"
version="$(sed -n 's/^DRIVER_VERSION=//p' "$ini" 2>/dev/null | head -n 1)"
if [ -z "$version" ]; then
  echo "auto_install: no DRIVER_VERSION in $ini" >&2
  exit 1
fi
echo "auto_install: installing NVIDIA driver $version"
sleep {seconds}
bin="$TENCENTCLOUD_EMULATOR_ROOT/usr/bin"
mkdir -p "$bin"
cat > "$bin/nvidia-smi.new" <<EOF
#!/bin/bash
# NVIDIA driver $version, as the local Tencent Cloud installs it.
if [ -n "\\${{CUDA_VISIBLE_DEVICES:-}}" ] && [ -x {host_smi} ]; then exec {host_smi} "\\$@"; fi
# No GPU lent to this instance: a driver that sees none.
for arg in "\\$@"; do case "\\$arg" in -L|--list-gpus|--query-gpu=*) exit 0;; esac; done
echo "NVIDIA-SMI $version    Driver Version: $version"
EOF
chmod +x "$bin/nvidia-smi.new"
mv "$bin/nvidia-smi.new" "$bin/nvidia-smi"
echo "auto_install: NVIDIA driver $version installed"
"""


def handle(request: web.Request, path: str, driver_install_seconds: float) -> web.StreamResponse:
    if request.method not in ("GET", "HEAD"):
        return web.Response(status=405)
    if path == INSTALLER:
        host_smi = shutil.which("nvidia-smi") or "/usr/bin/nvidia-smi"
        script = _INSTALLER.format(seconds=f"{driver_install_seconds:g}", host_smi=shlex.quote(host_smi))
        return web.Response(text=script, content_type="text/x-sh")
    if path == PYPI:
        return web.Response(text="<!DOCTYPE html><html><body></body></html>", content_type="text/html")
    return web.Response(status=404, text=f"{path}: not on the local Tencent Cloud's mirror")


def unreachable(host: str) -> web.Response:
    """What an instance's request to any other host of the internet gets from its proxy, the emulator: the
    emulator sends nothing off loopback, so even an instance with a public IP gets this (a deviation). An instance
    without one gets it too for COS of another region, which Tencent serves only on public addresses (server.py)."""
    return web.Response(status=502, reason="Unreachable",
                        text=f"{host} is unreachable from this instance: it has no public IP, and reaches only the "
                             f"metadata service, COS of its region and {HOST}\n")
