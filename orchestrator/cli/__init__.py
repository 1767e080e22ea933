"""The ``cvmjob`` command: a thin typer layer over ``orchestrator.api``."""
