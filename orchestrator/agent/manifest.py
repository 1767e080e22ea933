"""checkpoints/manifest.json: pure updates, and finding complete checkpoints in a local folder.

The manifest lists the complete checkpoints; it is written after their files, so whatever it lists can be
restored. ``keep_last`` counts by step: adding a checkpoint drops the oldest entries beyond it, and their
objects are deleted only after the manifest that no longer lists them is written.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from orchestrator.contract import CheckpointEntry, Manifest, checkpoint_step

MANIFEST = "manifest.json"


@dataclass(frozen=True)
class LocalCheckpoint:
    name: str
    step: int
    path: Path

    @property
    def is_file(self) -> bool:
        return self.path.is_file()

    def files(self) -> dict[str, Path]:
        """Relative path -> file; a file checkpoint holds itself under its own name."""
        if self.is_file:
            return {self.name: self.path}
        return {p.relative_to(self.path).as_posix(): p for p in sorted(self.path.rglob("*")) if p.is_file()}


def scan(directory: Path) -> list[LocalCheckpoint]:
    """The complete checkpoints in ``directory`` (named step-<N>, in place by atomic rename), oldest first."""
    if not directory.is_dir():
        return []
    found = []
    for entry in directory.iterdir():
        step = checkpoint_step(entry.name)
        if step is not None:
            found.append(LocalCheckpoint(entry.name, step, entry))
    return sorted(found, key=lambda c: (c.step, c.name))


def with_entry(manifest: Manifest, entry: CheckpointEntry, keep_last: int) -> tuple[Manifest, list[CheckpointEntry]]:
    """The manifest with ``entry`` added (replacing one of the same name) and trimmed to ``keep_last`` by step;
    and the entries dropped."""
    others = [c for c in manifest.checkpoints if c.name != entry.name]
    entries = sorted([*others, entry], key=lambda c: (c.step, c.time))
    kept, dropped = entries[-keep_last:], entries[:-keep_last]
    return manifest.model_copy(update={"checkpoints": kept}), dropped


def would_be_dropped(manifest: Manifest, step: int, keep_last: int) -> bool:
    """True when ``keep_last`` newer checkpoints are already listed: uploading this one would be wasted."""
    return sum(1 for c in manifest.checkpoints if c.step > step) >= keep_last
