"""The GPU memory estimate and the DataLoader advice against hand-computed cases (docs/spec.md, "Sizing from the
model"). GiB = 2**30 bytes."""

from __future__ import annotations

from typing import Any

import pytest

from orchestrator.plan.sizing import (
    GIB,
    checkpointed,
    checkpointed_layers,
    estimate,
    fewest_gpus,
    largest_batch,
    num_workers,
    processes_per_node,
    sharded,
    terms,
    with_batch,
)
from orchestrator.spec.compute import ModelSize
from orchestrator.spec.workload import TrainSpec

# The documents' example: BERT-base.
BERT: dict[str, Any] = {"params": 110_000_000, "batch_size": 32, "seq_len": 512, "hidden_dim": 768, "layers": 12}
ACTIVATION_VALUES = 32 * 512 * 768 * 12  # 150,994,944: 0.140625 Gi values


def model(**fields: Any) -> ModelSize:
    return ModelSize.model_validate({**BERT, **fields})


@pytest.mark.parametrize(("precision", "optimizer", "per_param", "activation_bytes", "total_bytes"), [
    # 4 weights + 4 gradients + 8 (m, v)
    ("fp32", "adam", (4, 4, 8), 4, 2_363_979_776),
    ("fp32", "adamw", (4, 4, 8), 4, 2_363_979_776),
    # the momentum buffer only
    ("fp32", "sgd", (4, 4, 4), 4, 1_923_979_776),
    # autocast: fp32 weights + their fp16 copies, fp32 gradients, fp16 activations
    ("amp", "adam", (6, 4, 8), 2, 2_281_989_888),
    ("amp", "adamw", (6, 4, 8), 2, 2_281_989_888),
    ("amp", "sgd", (6, 4, 4), 2, 1_841_989_888),
])
def test_the_documents_example_for_each_precision_and_optimizer(
    precision: str, optimizer: str, per_param: tuple[int, int, int], activation_bytes: int, total_bytes: int
) -> None:
    memory = estimate(model(precision=precision, optimizer=optimizer))
    weights, gradients, state = (110_000_000 * b for b in per_param)
    assert (memory.weights_bytes, memory.gradients_bytes, memory.optimizer_bytes) == (weights, gradients, state)
    assert memory.activations_bytes == ACTIVATION_VALUES * activation_bytes
    assert memory.total_bytes == total_bytes
    assert memory.vram_estimate_gib == total_bytes / GIB
    assert memory.required_gib == pytest.approx(total_bytes * 1.15 / GIB)


def test_fp32_adam_is_2_20_gib_and_2_53_with_the_default_headroom() -> None:
    memory = estimate(model())
    assert memory.activations_bytes / GIB == 0.5625  # 32 x 512 x 768 x 12 x 4 B
    assert round(memory.vram_estimate_gib, 2) == 2.20
    assert round(memory.required_gib, 2) == 2.53
    assert memory.headroom == 0.15


def test_headroom_is_what_each_gpu_must_have_on_top() -> None:
    bare = estimate(model(headroom=0))
    assert bare.required_gib == bare.vram_estimate_gib
    # 20 GiB of weights, gradients and state, no activations to speak of: 20 GiB fits 20 GiB without headroom only.
    exact = estimate(model(params=20 * GIB // 16, batch_size=1, seq_len=1, hidden_dim=1, layers=1, headroom=0))
    assert exact.total_bytes == 20 * GIB + 4
    assert not exact.fits(20) and exact.fits(20.001)
    assert not estimate(model(headroom=0.15)).fits(2.5) and estimate(model(headroom=0.15)).fits(2.54)


def test_the_terms_are_the_arithmetic_the_plan_shows() -> None:
    weights, gradients, optimizer, activations = terms(model(optimizer="sgd"))
    assert (weights.name, weights.factors, weights.bytes_each) == ("weights", (110_000_000,), 4)
    assert (optimizer.name, optimizer.bytes_each) == ("optimizer (sgd)", 4)
    assert (activations.factors, activations.bytes_each, activations.bytes) == \
        ((32, 512, 768, 12), 4, ACTIVATION_VALUES * 4)
    total = sum(t.bytes for t in (weights, gradients, optimizer, activations))
    assert total == estimate(model(optimizer="sgd")).total_bytes


# A 2 B-parameter model that no 40 GiB GPU holds: 8 + 8 + 16 GB of weights, gradients and Adam state and
# 16 x 2048 x 2048 x 24 x 4 B = 6 GiB of activations: 35.80 GiB, 41.17 GiB with headroom.
LARGE: dict[str, Any] = {"params": 2_000_000_000, "batch_size": 16, "seq_len": 2048, "hidden_dim": 2048, "layers": 24}


def test_sharding_the_optimizer_state_zero_1() -> None:
    large = estimate(model(**LARGE))
    assert round(large.required_gib, 2) == 41.17 and not large.fits(40)
    assert fewest_gpus(large, 40) == 2
    halves = sharded(large, 2)
    assert halves.optimizer_bytes == 8_000_000_000 and halves.weights_bytes == large.weights_bytes
    assert round(halves.required_gib, 2) == round((24e9 + 6 * GIB) * 1.15 / GIB, 2) == 32.60
    # Weights and gradients alone (16 GB + 6 GiB of activations, 25.2 GiB with headroom) never fit a 24 GiB A10.
    assert fewest_gpus(large, 24) is None


def test_sharding_everything_zero_3() -> None:
    large = estimate(model(**LARGE))
    # (32 GB / N + 6 GiB) x 1.15 <= 24 GiB: N = 2 is 24.04 GiB, N = 3 is 18.32 GiB.
    assert not sharded(large, 2, everything=True).fits(24)
    assert fewest_gpus(large, 24, everything=True) == 3
    three = sharded(large, 3, everything=True)
    assert (three.weights_bytes, three.gradients_bytes, three.optimizer_bytes) == \
        (2_666_666_667, 2_666_666_667, 5_333_333_334)
    assert three.activations_bytes == large.activations_bytes
    assert round(three.required_gib, 2) == 18.32
    # Activations alone over the GPU: no number of shards helps.
    assert fewest_gpus(estimate(model(**{**LARGE, "batch_size": 256})), 40, everything=True) is None


def test_the_largest_batch_that_fits_divides_the_batch_for_gradient_accumulation() -> None:
    large = model(**LARGE)
    memory = estimate(large)
    # 40 / 1.15 = 34.78 GiB; 29.80 GiB are weights, gradients and state: room for 13 samples of 0.375 GiB,
    # and 8 is the largest divisor of 16 (2 steps keep the effective batch).
    assert largest_batch(memory, large, 40) == 8
    assert with_batch(memory, large, 8).activations_bytes == 3 * GIB
    assert round(with_batch(memory, large, 8).required_gib, 2) == 37.72
    assert largest_batch(memory, large, 24) is None  # not even one sample: the parameters alone are 29.80 GiB
    prime = model(**{**LARGE, "batch_size": 13})
    assert largest_batch(estimate(prime), prime, 40) == 13  # it fits as it is
    prime = model(**{**LARGE, "batch_size": 17})
    assert largest_batch(estimate(prime), prime, 40) == 1


@pytest.mark.parametrize(("layers", "kept"), [
    (1, 1), (2, 2), (4, 4),  # too few layers for checkpointing to save anything
    (12, 7),  # segments of 4: 3 inputs + 4 recomputed
    (24, 10),  # segments of 5: 5 + 5
    (48, 14),  # segments of 7: 7 + 7
    (96, 20),  # segments of 10: 10 + 10
])
def test_activation_checkpointing_keeps_about_two_square_roots_of_the_layers(layers: int, kept: int) -> None:
    assert checkpointed_layers(layers) == kept


def test_activation_checkpointing_scales_the_activations_only() -> None:
    large = model(**LARGE)
    memory = estimate(large)
    kept = checkpointed(memory, large)
    assert kept.activations_bytes == 6 * GIB * 10 // 24
    assert kept.optimizer_bytes == memory.optimizer_bytes
    assert round(kept.required_gib, 2) == 37.15


@pytest.mark.parametrize(("nproc", "gpus", "processes"), [
    ("auto", 1.0, 1), ("auto", 8.0, 8), ("auto", 0.5, 1),  # a vGPU slice is one CUDA device
    ("auto", 0.0, 3),  # no GPU: cpu_nproc
    (2, 8.0, 2),
])
def test_processes_per_node_as_the_agent_starts_them(nproc: int | str, gpus: float, processes: int) -> None:
    train = TrainSpec.model_validate({"command": "python train.py", "nproc_per_node": nproc, "cpu_nproc": 3})
    assert processes_per_node(train, gpus) == processes


@pytest.mark.parametrize(("vcpus", "processes", "workers"), [
    (32, 1, 21),  # floor(2/3 x 32)
    (96, 8, 8),
    (40, 2, 13),
    (8, 8, 1),  # floor(2/3) is 0: at least one
    (0, 1, 1),
])
def test_num_workers_is_two_thirds_of_the_vcpus_per_process(vcpus: int, processes: int, workers: int) -> None:
    assert num_workers(vcpus, processes) == workers
