"""``python3 -m orchestrator.agent --config <dir>/agent.json --workdir <dir>``: the agent of one attempt on
one node, started by the UserData bootstrap (orchestrator/staging/bootstrap.py) at first boot and at every later boot.

Exit codes: 0 when result.json is written (whatever the outcome) or was already; 1 when the agent cannot even
reach COS to say why (the reason is in <dir>/agent.log and <dir>/run.log); 143 after SIGTERM (a shutdown:
the next boot resumes the attempt).
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType

from orchestrator.contract import CHECKPOINT_SIGNAL, AgentConfig

from .attempt import Attempt
from .cloud import connect
from .errors import AgentTerminated
from .metadata import Metadata, MetadataError
from .paths import NodePaths

log = logging.getLogger("orchestrator.agent")


def _configure_logging(run_log: Path) -> None:
    formatter = logging.Formatter("%(asctime)s cvmjob-agent %(levelname)s %(message)s")
    root = logging.getLogger()
    root.setLevel(logging.INFO)
    for handler in (logging.StreamHandler(sys.stderr), logging.FileHandler(run_log)):
        handler.setFormatter(formatter)
        root.addHandler(handler)
    for noisy in ("urllib3", "tencentcloud"):  # one line per request otherwise
        logging.getLogger(noisy).setLevel(logging.WARNING)
    # The COS SDK logs every 404 (an absent control.json, each poll) as an ERROR before raising; the agent handles
    # and logs the errors that matter itself.
    logging.getLogger("qcloud_cos").setLevel(logging.CRITICAL)


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    raise AgentTerminated()


def _instance_id(metadata: Metadata, patience: float = 120.0, clock: Callable[[], float] = time.monotonic) -> str:
    """This instance's id, asked again for up to ``patience`` seconds: a document signed "unknown" is taken as
    absent by the controller, so one slow answer at start (a loaded host's 2 s timeout) stalled the attempt until
    its boot deadline (a clean-clone run's fault row checkpoints-shared-upload-to)."""
    deadline = clock() + patience
    while True:
        try:
            found = metadata.get("instance-id")
        except MetadataError as exc:
            found, why = None, str(exc)
        else:
            why = "no instance-id"
        if found:
            return found
        if clock() >= deadline:
            log.warning("no instance id from the metadata service (%s)", why)
            return "unknown"
        time.sleep(1.0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m orchestrator.agent", description=__doc__)
    parser.add_argument("--config", type=Path, required=True, help="agent.json (AgentConfig)")
    parser.add_argument("--workdir", type=Path, required=True, help="this attempt's folder on this node")
    args = parser.parse_args(argv)
    paths = NodePaths(args.workdir.resolve())
    paths.home.mkdir(parents=True, exist_ok=True)
    _configure_logging(paths.run_log)
    # Children inherit "ignored": SIGUSR1 reaches every training process, and only trainkit's handler acts on it.
    signal.signal(CHECKPOINT_SIGNAL, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        cfg = AgentConfig.model_validate_json(args.config.read_bytes())
        metadata = Metadata()
        attempt = Attempt(cfg, paths, connect(cfg, metadata), metadata, _instance_id(metadata))
        return attempt.run()
    except AgentTerminated:
        log.warning("SIGTERM before the attempt started")
        return 143
    except Exception:
        log.exception("the agent failed before it could report a result")
        return 1


if __name__ == "__main__":
    sys.exit(main())
