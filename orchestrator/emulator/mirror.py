"""Tencent's software mirror as an instance without a public IP sees it, http://mirrors.tencentyun.com
(docs/emulator.md, "Network"), and the refusal of every other host on the internet.

Served: ``/ubuntu/install/<package>``, what the public images' ``apt-get install`` runs (``APT_GET``; only
``docker.io``, a container runtime, where this machine has Podman), ``/install/GPU/auto_install.sh``, the GPU
driver's auto-install (the API's stand-in for the console's
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
PACKAGES = "/ubuntu/install/"  # what the emulated image's apt-get fetches (APT_GET): one install script a package

# The public images' apt-get: packages come from the mirror, the only host an instance without a public IP
# reaches; ``update`` has nothing to do, ``install`` runs each package's script from the mirror.
APT_GET = r"""#!/bin/bash
# apt-get of the local Tencent Cloud's public images (orchestrator/emulator/mirror.py).
set -eu
action=""; packages=()
for arg in "$@"; do
  case "$arg" in -*) ;; *) if [ -z "$action" ]; then action="$arg"; else packages+=("$arg"); fi ;; esac
done
case "$action" in
  update) echo "Hit:1 http://mirrors.tencentyun.com/ubuntu jammy InRelease" ;;
  install)
    for package in "${packages[@]}"; do
      script="$(mktemp)"
      if ! python3 -c 'import sys, urllib.request; urllib.request.urlretrieve(sys.argv[1], sys.argv[2])' \
          "http://mirrors.tencentyun.com/ubuntu/install/$package" "$script" 2>/dev/null; then
        echo "E: Unable to locate package $package" >&2
        exit 100
      fi
      echo "Setting up $package ..."
      bash "$script"
    done ;;
  *) echo "E: Invalid operation $action" >&2; exit 100 ;;
esac
"""

# docker.io: the machine's Podman behind the docker command (as Debian's podman-docker), with its storage, its
# logins and its settings on the instance's system disk. runc, cgroupfs and the ulimits are this machine kind's
# needs (a VM with hybrid cgroups, where crun and raising the limits fail); http for the registry: the emulator
# has no certificate for Tencent's registry hosts. File locks: the instances' Podmans must not share the
# machine's lock memory.
_DOCKER = r"""#!/bin/bash
set -eu
root="$TENCENTCLOUD_EMULATOR_ROOT"
mkdir -p "$root/usr/bin"
cat > "$root/usr/bin/docker.new" <<'WRAPPER'
#!/bin/bash
# docker.io as the local Tencent Cloud installs it: Podman, with this instance's settings and storage. Every path is
# the instance's own at each call: a custom image copies this disk into other instances, under other roots.
set -eu
root="$TENCENTCLOUD_EMULATOR_ROOT"
etc="$root/etc/containers"
if [ "$(cat "$etc/.root" 2>/dev/null || true)" != "$root" ]; then
  # The first call on this instance: its /run is new (as after a boot), and libpod's database names the old
  # paths; the images stay.
  rm -rf "$root/run/containers" "$root/run/libpod" "$root/var/lib/containers/storage/libpod"
  mkdir -p "$etc" "$root/var/lib/containers/storage" "$root/run/containers" "$root/root/.docker"
  cat > "$etc/containers.conf" <<CONF
[containers]
default_ulimits = ["nofile=1024:1024", "nproc=1024:1024"]
[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
events_logfile_path = "$root/run/containers/events.log"
tmp_dir = "$root/run/libpod"
lock_type = "file"
CONF
  cat > "$etc/storage.conf" <<CONF
[storage]
driver = "overlay"
graphroot = "$root/var/lib/containers/storage"
runroot = "$root/run/containers/storage"
CONF
  cat > "$etc/registries.conf" <<CONF
unqualified-search-registries = ["docker.io"]
[[registry]]
location = "ccr.ccs.tencentyun.com"
insecure = true
[[registry]]
prefix = "*.tencentcloudcr.com"
insecure = true
[[registry]]
location = "mirror.ccs.tencentyun.com"
insecure = true
[[registry]]
location = "docker.io"
insecure = true
CONF
  echo "$root" > "$etc/.root"
fi
# Podman refuses a pull without a login when the auth file it is given does not exist (Docker takes none).
[ -f "$root/root/.docker/config.json" ] || echo '{}' > "$root/root/.docker/config.json"
export CONTAINERS_CONF="$etc/containers.conf" CONTAINERS_STORAGE_CONF="$etc/storage.conf"
export CONTAINERS_REGISTRIES_CONF="$etc/registries.conf" REGISTRY_AUTH_FILE="$root/root/.docker/config.json"
# Every process of the instance carries its marker, those in its containers too: a power-off kills them all.
if [ "${1:-}" = run ]; then shift; set -- run --env "TENCENTCLOUD_EMULATOR_ROOT=$root" "$@"; fi
exec PODMAN "$@"
WRAPPER
chmod +x "$root/usr/bin/docker.new"
mv "$root/usr/bin/docker.new" "$root/usr/bin/docker"
"""

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
    if path == PACKAGES + "docker.io":
        podman = shutil.which("podman")
        if podman is None:  # this machine cannot run containers: the package is not on the mirror
            return web.Response(status=404, text="docker.io: not on the local Tencent Cloud's mirror (no podman here)")
        return web.Response(text=_DOCKER.replace("PODMAN", shlex.quote(podman)), content_type="text/x-sh")
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
