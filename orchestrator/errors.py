"""The one base of the errors a user gets as one line and an exit code (the CLI's main() catches it alone).

Each subclass says what went wrong and what to do about it, and carries the documented exit code (README
"Commands and exit codes"): 2 bad input or configuration, nothing created; 3 the cloud or another controller
refused before anything was created.
"""

from __future__ import annotations

EXIT_BAD_INPUT = 2  # the spec, the command line or the configuration is wrong; nothing was created
EXIT_CLOUD_ERROR = 3  # credentials, permissions or the cloud refused before anything was created
EXIT_GATE_FAILED = 5  # the job succeeded, but a metric missed its gate (or was never reported): ci/gate.py


class CvmjobError(Exception):
    exit_code: int = EXIT_BAD_INPUT

    def hint(self) -> str:
        """What the one line says: the message, and what to do when the message itself does not say it."""
        return str(self)
