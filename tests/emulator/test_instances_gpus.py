"""GPU lending without GPUs: nvidia-smi's output as seen on a real host, and the pool's rules (runtime/gpus.py)."""

from __future__ import annotations

from orchestrator.emulator.runtime.gpus import Gpu, GpuPool, detect, parse_query

# `nvidia-smi --query-gpu=index,name,memory.total --format=csv,noheader` on an H200 host.
H200_HOST = "0, NVIDIA H200, 143771 MiB\n1, NVIDIA H200, 143771 MiB\n"


def test_parse_query() -> None:
    assert parse_query(H200_HOST) == (Gpu(0, "NVIDIA H200", 143771), Gpu(1, "NVIDIA H200", 143771))
    assert parse_query("") == ()


def test_pool_lends_whole_free_devices_only() -> None:
    pool = GpuPool(parse_query(H200_HOST))
    assert pool.assign("ins-aaaaaaaa", 1) == [0]
    assert pool.assign("ins-bbbbbbbb", 2) == []  # one left: CPU-only
    assert pool.assign("ins-cccccccc", 0.5) == []  # a vGPU slice has no local stand-in
    assert pool.assign("ins-dddddddd", 1) == [1]
    pool.release("ins-aaaaaaaa")
    assert pool.assign("ins-eeeeeeee", 1) == [0]
    assert pool.restore("ins-ffffffff", [1]) == []  # taken by ins-dddddddd
    assert pool.restore("ins-dddddddd", [7]) == []  # the device is gone from this host


def test_none_means_none() -> None:
    assert detect("none") == ()
