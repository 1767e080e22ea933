from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from orchestrator.spec import JobSpec, load_spec, spec_digest, spec_to_json
from tests.unit.spec.conftest import FULL_SPEC, MINIMAL_SPEC


def test_json_is_compact_sorted_and_complete(write_spec: Callable[[str], Path]) -> None:
    text = spec_to_json(load_spec(write_spec(MINIMAL_SPEC)))
    assert text.startswith('{"billing":{"mode":"on-demand"')
    assert ": " not in text and '"max_runtime":86400' in text


def test_digest_ignores_spelling_and_order_but_not_meaning(write_spec: Callable[[str], Path]) -> None:
    plain = spec_digest(load_spec(write_spec(MINIMAL_SPEC)))
    reordered = "train: {command: python train.py}\ninstance: {type: S5.MEDIUM4}\nregion: ap-guangzhou\nname: tiny\n"
    explicit = MINIMAL_SPEC + "billing: {mode: on-demand}\nlimits: {max_runtime: 1d}\n"

    assert spec_digest(load_spec(write_spec(reordered))) == plain
    assert spec_digest(load_spec(write_spec(explicit))) == plain
    assert spec_digest(load_spec(write_spec(MINIMAL_SPEC), ["train.nnodes=2"])) != plain
    assert len(plain) == 64


def test_json_validates_back_to_the_same_spec(write_spec: Callable[[str], Path]) -> None:
    spec = load_spec(write_spec(FULL_SPEC))
    again = JobSpec.model_validate_json(spec_to_json(spec))
    assert again == spec and spec_digest(again) == spec_digest(spec)
