"""benchmarks/checkpoint_stall.py in its CPU mode: it runs the example's training and ends with its summary line."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[2]
LAST_LINE = re.compile(r"checkpoint_stall: mode=cpu images_per_s_none=(?P<none>[0-9.]+) "
                       r"images_per_s_every10=(?P<every>[0-9.]+) slowdown_pct=(?P<slowdown>-?[0-9.]+)")


@pytest.mark.slow
def test_the_cpu_mode_times_the_three_ways_and_ends_with_its_summary_line(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-W", "error", str(ROOT / "benchmarks" / "checkpoint_stall.py"), "--cpu",
                           "--directory", str(tmp_path)], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.strip().splitlines()
    summary = LAST_LINE.fullmatch(lines[-1])
    assert summary is not None, done.stdout
    none, every = float(summary["none"]), float(summary["every"])
    assert none > 0 and every > 0
    assert float(summary["slowdown"]) == pytest.approx(100 * (none - every) / none, abs=2)
    table = "\n".join(lines)
    for way in ("none", "every 10, async (default)", "every 10, sync (async_save=False)"):
        assert re.search(rf"^{re.escape(way)} +[0-9.]+", table, re.MULTILINE), table
    assert list(tmp_path.iterdir()) == []  # its checkpoints went with it
