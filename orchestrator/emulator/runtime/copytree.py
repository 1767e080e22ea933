"""Copying disk trees (image capture, launching from a custom image) off the event loop.

A running instance keeps changing its disk while it is imaged (the real CreateImage warns that imaging a running
instance may miss data), so the copy tolerates a live tree: entries that vanish mid-copy are skipped, symlinks are
copied as links (never followed out of the sandbox), and sockets, FIFOs and devices are skipped (opening a FIFO
would block the copy forever).
"""

from __future__ import annotations

import os
import shutil
import stat
import threading
from collections.abc import Callable
from pathlib import Path


def copy_live_tree(src: Path, dst: Path) -> None:
    if not src.is_dir():
        raise FileNotFoundError(f"{src} is not a directory")
    dst.mkdir(parents=True, exist_ok=True)
    modes: list[tuple[Path, int]] = []
    # os.walk skips directories that vanish before it lists them (onerror=None), which is what a live tree needs.
    for dirpath, dirnames, filenames in os.walk(src):
        source_dir = Path(dirpath)
        target_dir = dst / source_dir.relative_to(src)
        try:
            modes.append((target_dir, stat.S_IMODE(source_dir.stat().st_mode)))
        except FileNotFoundError:
            continue
        for name in (*dirnames, *filenames):
            _copy_entry(source_dir / name, target_dir / name)
    # Modes last: a read-only directory must still accept the files copied into it.
    for path, mode in reversed(modes):
        if path.is_dir():
            path.chmod(mode)


def _copy_entry(source: Path, target: Path) -> None:
    try:
        info = source.lstat()
        if stat.S_ISLNK(info.st_mode):
            target.symlink_to(os.readlink(source))
        elif stat.S_ISDIR(info.st_mode):
            target.mkdir(exist_ok=True)
        elif stat.S_ISREG(info.st_mode):
            shutil.copy2(source, target, follow_symlinks=False)
    except FileNotFoundError:
        pass


class CopyJob:
    """Replace ``dst`` with a copy of ``src`` in a thread; ``finished_at`` is the cloud time it finished."""

    def __init__(self, src: Path, dst: Path, now: Callable[[], float]) -> None:
        self.src, self.dst = src, dst
        self.error: str | None = None
        self.finished_at: float | None = None
        self._now = now
        self._thread = threading.Thread(target=self._run, name=f"copy-{dst.name}", daemon=True)
        self._thread.start()

    @property
    def done(self) -> bool:
        return self.finished_at is not None

    def join(self, timeout: float | None = None) -> None:
        self._thread.join(timeout)

    def _run(self) -> None:
        try:
            if self.dst.exists():
                shutil.rmtree(self.dst)
            copy_live_tree(self.src, self.dst)
        except OSError as exc:
            self.error = f"copying {self.src.name}: {exc}"
        finally:
            self.finished_at = self._now()
