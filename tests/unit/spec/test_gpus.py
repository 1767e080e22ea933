from __future__ import annotations

import pytest

from orchestrator.spec.gpus import GPU_MODELS, GPU_TYPES, gpu_counts, is_vgpu_type, types_with, vgpu_advice
from orchestrator.spec.suggest import did_you_mean, suggest


@pytest.mark.parametrize("name", ["GN7.LARGE20", "GN7.2XLARGE40", "GN7vw.LARGE16", "GN7vw.2XLARGE32",
                                  "GN7vw.4XLARGE64", "GN7vw.99XLARGE1"])
def test_vgpu_types(name: str) -> None:
    assert is_vgpu_type(name)


@pytest.mark.parametrize("name", ["GN7.2XLARGE32", "GN7.5XLARGE80", "GT4.4XLARGE96", "S5.MEDIUM4", "GN7"])
def test_full_gpu_and_cpu_types_are_not_vgpu(name: str) -> None:
    assert not is_vgpu_type(name)


def test_the_half_t4_trap_message() -> None:
    assert vgpu_advice("GN7.2XLARGE40") == ("GN7.2XLARGE40 is half a T4 (vGPU, 8 GB); for a full T4 use GN7.2XLARGE32, "
                                            "or set instance.allow_vgpu: true")


def test_table_covers_every_model_with_whole_cards() -> None:
    assert {t.gpu for t in GPU_TYPES} == set(GPU_MODELS)
    assert not any(is_vgpu_type(t.name) for t in GPU_TYPES)
    assert [t.name for t in types_with("A100")] == ["GT4.4XLARGE96", "GT4.8XLARGE192", "GT4.20XLARGE474",
                                                    "GT4.41XLARGE948", "HCCPNV4h.48XLARGE1024"]
    assert gpu_counts("T4") == (1, 2, 4)
    assert gpu_counts("V100") == (1, 2, 4, 8)


def test_suggest_nearest_instance_type() -> None:
    catalog = ["GN7.2XLARGE32", "GN7.2XLARGE40", "GN7.5XLARGE80", "S5.MEDIUM4"]
    assert suggest("GN7.2XLARGE23", catalog) == "GN7.2XLARGE32"
    assert suggest("gn7.5xlarge80", catalog) == "GN7.5XLARGE80"
    assert suggest("XYZ", catalog) is None
    assert suggest("S5.MEDIUM4", catalog) is None  # never the rejected value itself
    assert did_you_mean("trian", ["name", "train"]) == "did you mean 'train'?"
    assert did_you_mean("zzz", ["name", "train"]) == ""
