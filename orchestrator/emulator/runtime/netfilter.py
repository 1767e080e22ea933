"""The security groups between instances that share one machine's loopback (vpc/reach.py decides, reach.c
enforces): each instance has an address of its own in 127.0.0.0/8 (its private address's last three octets), and a
library preloaded into its processes lets connect() reach another instance's address only on the ports the
groups admit, as listed in the instance's ``reach`` file.

The library is built from reach.c with the machine's C compiler (``$CC``, else ``cc``) into the user's cache
(``$XDG_CACHE_HOME/cvmjob-emulator``), once per machine and source. Without a compiler the emulator says so once
and does not enforce the groups between instances (docs/emulator.md).
"""

from __future__ import annotations

import hashlib
import logging
import os
import subprocess
from pathlib import Path

log = logging.getLogger("cvmjob.emulator")

SOURCE = Path(__file__).with_name("reach.c")
EMULATOR_ADDRESS = "127.0.0.1"


def loopback_of(private_address: str) -> str:
    """An instance's own address on this machine: 127 and its private address's last three octets."""
    return "127." + ".".join(private_address.split(".")[1:])


def build(fallback_dir: Path) -> Path | None:
    """The preload library, built when missing into the user's cache (once a machine and source; else beside
    the emulator's state, ``fallback_dir``); None (said once in the log) when it cannot be."""
    source = SOURCE.read_bytes()
    name = f"reach-{hashlib.sha256(source).hexdigest()[:12]}.so"
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "cvmjob-emulator"
    try:
        cache.mkdir(parents=True, exist_ok=True)
    except OSError:
        cache = fallback_dir
    library = cache / name
    if library.exists():
        return library
    compiler = os.environ.get("CC", "cc")
    partial = library.with_suffix(f".{os.getpid()}.tmp")
    try:
        subprocess.run([compiler, "-shared", "-fPIC", "-O2", "-o", str(partial), str(SOURCE), "-ldl"],
                       capture_output=True, text=True, timeout=120, check=True)
    except (OSError, subprocess.SubprocessError) as exc:
        said = getattr(exc, "stderr", "") or exc
        log.warning("security groups are not enforced between instances: cannot build %s with %s (%s); "
                    "install a C compiler (Debian: apt-get install gcc)", SOURCE.name, compiler, said)
        partial.unlink(missing_ok=True)
        return None
    partial.replace(library)
    return library


def write_table(path: Path, reachable: list[tuple[str, int, int]]) -> None:
    """The instance's ``reach`` file: one ``address low high`` line per reachable TCP port range, replaced whole."""
    partial = path.with_suffix(".tmp")
    partial.write_text("".join(f"{address} {low} {high}\n" for address, low, high in reachable))
    partial.replace(path)
