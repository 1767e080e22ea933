"""Quality gates: what parses, the one line for what does not, and what a pass, a miss and a silence say."""

from __future__ import annotations

import pytest

from orchestrator.ci.gate import Comparison, Gate, GateError, check, parse_gate
from orchestrator.errors import EXIT_BAD_INPUT, EXIT_CLOUD_ERROR, EXIT_GATE_FAILED
from orchestrator.state.machine import EXIT_CODES


@pytest.mark.parametrize(("text", "metric", "comparison", "threshold", "expression"), [
    ("val_loss<=0.30", "val_loss", Comparison.AT_MOST, 0.30, "val_loss<=0.30"),
    ("val_accuracy >= 0.9", "val_accuracy", Comparison.AT_LEAST, 0.9, "val_accuracy>=0.9"),
    ("  loss<0.5 ", "loss", Comparison.BELOW, 0.5, "loss<0.5"),
    ("acc>0.8", "acc", Comparison.ABOVE, 0.8, "acc>0.8"),
    ("eval.top1 > -1e-3", "eval.top1", Comparison.ABOVE, -0.001, "eval.top1>-1e-3"),
])
def test_a_gate_parses_into_metric_comparison_and_threshold(
        text: str, metric: str, comparison: Comparison, threshold: float, expression: str) -> None:
    gate = parse_gate(text)
    assert (gate.metric, gate.comparison, gate.threshold, gate.expression) == (
        metric, comparison, threshold, expression)


@pytest.mark.parametrize(("text", "line"), [
    ("", "gate '': it is empty; give a metric, a comparison (<=, <, >=, >) and a threshold (e.g. val_loss<=0.30)"),
    ("   ", "gate '   ': it is empty; give a metric, a comparison (<=, <, >=, >) and a threshold "
           "(e.g. val_loss<=0.30)"),
    ("val_loss 0.3", "gate 'val_loss 0.3': no comparison; put one of <=, <, >=, > between the metric and the "
                     "threshold (e.g. val_loss<=0.30)"),
    ("val_loss==0.3", "gate 'val_loss==0.3': '==' is not a comparison; use one of <=, <, >=, > (e.g. val_loss<=0.30)"),
    ("val_loss=0.3", "gate 'val_loss=0.3': '=' is not a comparison; use one of <=, <, >=, > (e.g. val_loss<=0.30)"),
    ("acc=>0.9", "gate 'acc=>0.9': '=>' is not a comparison; use one of <=, <, >=, > (e.g. val_loss<=0.30)"),
    ("val_loss<=", "gate 'val_loss<=': no threshold after '<=' (e.g. val_loss<=0.30)"),
    ("val_loss <=  ", "gate 'val_loss <=  ': no threshold after '<=' (e.g. val_loss<=0.30)"),
    ("val_loss<=low", "gate 'val_loss<=low': the threshold 'low' is not a number (e.g. val_loss<=0.30)"),
    ("val_loss<=nan", "gate 'val_loss<=nan': the threshold 'nan' is not a finite number (e.g. val_loss<=0.30)"),
    ("val_loss<=inf", "gate 'val_loss<=inf': the threshold 'inf' is not a finite number (e.g. val_loss<=0.30)"),
    ("acc>-Infinity", "gate 'acc>-Infinity': the threshold '-Infinity' is not a finite number (e.g. val_loss<=0.30)"),
    ("<=0.3", "gate '<=0.3': no metric before '<=' (e.g. val_loss<=0.30)"),
    ("1st_loss<=0.3", "gate '1st_loss<=0.3': '1st_loss' is not a metric name (letters, digits, '_' and '.', not "
                      "starting with a digit) (e.g. val_loss<=0.30)"),
    ("val loss<=0.3", "gate 'val loss<=0.3': 'val loss' is not a metric name (letters, digits, '_' and '.', not "
                      "starting with a digit) (e.g. val_loss<=0.30)"),
])
def test_a_bad_gate_is_one_line_saying_what_is_wrong_with_the_text_and_an_example(text: str, line: str) -> None:
    with pytest.raises(GateError) as caught:
        parse_gate(text)
    assert caught.value.hint() == line
    assert "\n" not in line
    assert caught.value.exit_code == EXIT_BAD_INPUT


def test_the_gate_exit_code_is_its_own() -> None:
    taken = {*EXIT_CODES.values(), EXIT_BAD_INPUT, EXIT_CLOUD_ERROR, 4}  # 4: `sweep run` stopped early
    assert EXIT_GATE_FAILED not in taken


@pytest.mark.parametrize(("text", "value", "passed", "message"), [
    ("val_loss<=0.30", 0.281, True, "val_loss=0.281 <= 0.30"),
    ("val_loss<=0.30", 0.30, True, "val_loss=0.3 <= 0.30"),  # the bound is inclusive
    ("val_loss<=0.30", 0.342, False, "val_loss=0.342 > 0.30 (missed by 0.042)"),
    ("loss<0.5", 0.5, False, "loss=0.5 >= 0.5 (missed by 0)"),  # a strict bound misses at equality
    ("loss<0.5", 0.25, True, "loss=0.25 < 0.5"),
    ("val_accuracy>=0.9", 0.875, False, "val_accuracy=0.875 < 0.9 (missed by 0.025)"),
    ("val_accuracy>=0.9", 0.9, True, "val_accuracy=0.9 >= 0.9"),
    ("acc>0.8", 0.8, False, "acc=0.8 <= 0.8 (missed by 0)"),
    ("acc>0.8", 0.95, True, "acc=0.95 > 0.8"),
])
def test_a_gate_passes_or_says_by_how_much_it_missed(text: str, value: float, passed: bool, message: str) -> None:
    gate = parse_gate(text)
    (result,) = check([gate], {gate.metric: value, "other": 1.0})
    assert (result.passed, result.value, result.message) == (passed, value, message)
    assert (result.missed_by is None) == passed


def test_missed_by_is_the_distance_to_the_threshold() -> None:
    (result,) = check([parse_gate("val_loss<=0.30")], {"val_loss": 0.342})
    assert result.missed_by == pytest.approx(0.042)


def test_a_metric_the_job_never_reported_fails_its_gate_and_says_how_to_report_it() -> None:
    results = check([parse_gate("val_loss<=0.30"), parse_gate("val_f1>0.5")], {"val_loss": 0.2, "loss": 0.1})
    assert [r.passed for r in results] == [True, False]
    never = results[1]
    assert (never.value, never.missed_by) == (None, None)
    assert never.message == ("val_f1 was never reported: the training script must report it, "
                             "e.g. trainkit.report(step, loss, val_f1=value)")


def test_results_keep_the_order_of_the_gates_and_repeat_a_metric_gated_twice() -> None:
    gates = [parse_gate("acc>=0.5"), parse_gate("acc<=0.99"), parse_gate("loss<1")]
    results = check(gates, {"acc": 0.995, "loss": 0.5})
    assert [(r.gate, r.passed) for r in results] == [(gates[0], True), (gates[1], False), (gates[2], True)]


def test_a_result_is_data_for_the_json_output() -> None:
    (result,) = check([parse_gate("val_loss <= 0.30")], {"val_loss": 0.342})
    dumped = result.model_dump(mode="json")
    assert dumped["gate"] == {"metric": "val_loss", "comparison": "<=", "threshold": 0.3, "threshold_text": "0.30"}
    assert dumped["passed"] is False
    assert Gate.model_validate(dumped["gate"]) == result.gate
