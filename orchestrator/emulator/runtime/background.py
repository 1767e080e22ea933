"""Work the event loop must not wait for: deleting directory trees, waiting for process groups to die.

One ``Background`` serves the whole emulator and outlives resets, so that exit (``join``) waits for every tree a
reset or a deletion set aside, whichever account's state it was.
"""

from __future__ import annotations

import shutil
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
    shutil.rmtree(path, ignore_errors=True)


def set_aside(path: Path) -> Path:
    """Rename ``path`` to a hidden sibling no one else will pick; return the new name."""
    trash = path.with_name(f".{path.name}-deleted-{uuid.uuid4().hex[:8]}")
    path.rename(trash)
    return trash
