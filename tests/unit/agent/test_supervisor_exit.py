from __future__ import annotations

from pathlib import Path

from orchestrator.agent.supervisor import worker_exit_code

REPORT = """step=3 loss=0.5
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
============================================================
fail.py FAILED
------------------------------------------------------------
Failures:
  <NO_OTHER_FAILURES>
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2026-11-30_00:02:16
  host      : localhost
  rank      : 0 (local_rank: 0)
  exitcode  : 3 (pid: 30872)
  error_file: <N/A>
============================================================
"""


def test_the_failed_workers_exit_code_is_read_from_torchruns_report(tmp_path: Path) -> None:
    log = tmp_path / "run.log"
    log.write_text(REPORT)
    assert worker_exit_code(log) == 3
    log.write_text("step=1\nTraceback: something else\n")
    assert worker_exit_code(log) is None
    assert worker_exit_code(tmp_path / "missing.log") is None
