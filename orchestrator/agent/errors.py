"""How a phase ends the attempt: with an outcome and a reason for result.json."""

from __future__ import annotations

from orchestrator.contract import Outcome


class AttemptEnded(Exception):
    def __init__(self, outcome: Outcome, reason: str, exit_code: int | None = None) -> None:
        super().__init__(f"{outcome.value}: {reason}")
        self.outcome = outcome
        self.reason = reason
        self.exit_code = exit_code


class AgentTerminated(BaseException):
    """The agent got SIGTERM (a shutdown or reboot): stop everything, write no result, so that the agent started
    at the next boot resumes the attempt. A BaseException so that no ``except Exception`` swallows it."""
