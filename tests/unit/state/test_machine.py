from __future__ import annotations

from orchestrator.state.machine import ALLOWED, EXIT_CODES, TERMINAL, JobState, all_transitions


def test_every_state_has_a_row_and_terminal_states_have_exit_codes() -> None:
    assert set(ALLOWED) == set(JobState)
    assert set(EXIT_CODES) == set(TERMINAL)
    assert EXIT_CODES[JobState.SUCCEEDED] == 0
    assert len(set(EXIT_CODES.values())) == len(EXIT_CODES)


def test_terminal_states_are_reached_only_through_teardown() -> None:
    for source, targets in ALLOWED.items():
        for target in targets & TERMINAL:
            assert source in (JobState.TEARING_DOWN, JobState.PENDING), (source, target)


def test_every_active_state_can_reach_teardown_or_an_end() -> None:
    for state in JobState:
        if state.is_active() and state != JobState.TEARING_DOWN:
            assert ALLOWED[state] & ({JobState.TEARING_DOWN} | TERMINAL), state


def test_all_transitions_lists_each_edge_once() -> None:
    edges = all_transitions()
    assert len(edges) == len(set(edges)) == sum(len(t) for t in ALLOWED.values())
