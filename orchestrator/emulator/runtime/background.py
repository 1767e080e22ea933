"""Work the event loop must not wait for: deleting directory trees, waiting for process groups to die.

One ``Background`` serves the whole emulator and outlives resets, so that exit (``join``) waits for every tree a
reset or a deletion set aside, whichever account's state it was.
"""

from __future__ import annotations

import shutil
import subprocess
import threading
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any


class Background:
    def __init__(self) -> None:
        self._threads: list[threading.Thread] = []

    def run(self, target: Callable[..., None], *args: Any) -> None:
        self._threads = [t for t in self._threads if t.is_alive()]
        thread = threading.Thread(target=target, args=args, daemon=True)
        self._threads.append(thread)
        thread.start()

    def delete(self, path: Path) -> None:
        """Move ``path`` out of the way now (its name is free at once) and delete it in the background."""
        if path.exists():
            self.run(remove_tree, set_aside(path))

    def join(self) -> None:
        for thread in self._threads:
            thread.join()
        self._threads.clear()


def remove_tree(path: Path) -> None:
    """Delete ``path``, first detaching what is mounted under it (a container's root file system that a killed
    runtime left mounted on a disk of the instance), as a power-off leaves nothing mounted."""
    for mount in mounted_under(path):
        subprocess.run(["umount", "--lazy", str(mount)], capture_output=True, check=False)
    shutil.rmtree(path, ignore_errors=True)


def mounted_under(path: Path) -> list[Path]:
    """Mount points at or below ``path``, deepest first."""
    try:
        lines = Path("/proc/self/mounts").read_text().splitlines()
    except OSError:
        return []
    base = str(path.resolve())
    points = [Path(line.split()[1].replace("\\040", " ")) for line in lines if len(line.split()) > 1]
    return sorted((p for p in points if str(p) == base or str(p).startswith(base + "/")),
                  key=lambda p: len(p.parts), reverse=True)


def set_aside(path: Path) -> Path:
    """Rename ``path`` to a hidden sibling no one else will pick; return the new name."""
    trash = path.with_name(f".{path.name}-deleted-{uuid.uuid4().hex[:8]}")
    path.rename(trash)
    return trash
