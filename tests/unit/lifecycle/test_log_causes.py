"""The transient failures train.retry.on_log finds in a log tail, and only the ones asked for."""

from __future__ import annotations

from orchestrator.lifecycle.log_causes import log_cause

WATCHDOG = ("[rank0]:[E321 02:07:08.408271257 ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog caught collective operation "
            "timeout: WorkNCCL(SeqNum=1580, OpType=ALLREDUCE, NumelIn=466119168, NumelOut=466119168, "
            "Timeout(ms)=600000) ran for 600060 milliseconds before timing out.")


def test_each_cause_is_found_only_when_asked_for() -> None:
    assert log_cause(f"step 3\n{WATCHDOG}\n", ("nccl_timeout", "gpu_xid")) == "an NCCL timeout"
    assert log_cause(WATCHDOG, ("gpu_xid",)) is None
    assert log_cause("NVRM: Xid (PCI:0000:3b:00): 48, pid=812, DBE (double bit error)", ("gpu_xid",)) == \
        "a GPU's Xid error"
    assert log_cause("RuntimeError: CUDA error: out of memory", ("nccl_timeout", "gpu_xid")) is None
    assert log_cause(WATCHDOG, ()) is None
