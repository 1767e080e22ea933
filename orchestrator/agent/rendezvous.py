"""Multi-node rendezvous through COS: node 0 publishes where its c10d store listens (rendezvous.json), the
other nodes wait for it, then make sure they reach it before starting torchrun.

Node 0's address is its private IP (metadata ``local-ipv4``). The port is one the OS reports free right now (a tiny
race with other programs is accepted: torchrun then fails, visibly). A node-0 agent that restarts publishes a new
endpoint; nodes already training with the old one fail in torchrun and the attempt is retried by the controller.

Reaching it: a refused connection means node 0's torchrun is not listening yet (its host answers); one that times
out was dropped on the way, as a security group that does not admit the job's nodes drops it (a group made
through the API admits nothing). torchrun would retry such a connection until its own timeout, minutes later, and
say only that the rendezvous timed out: the agent says which groups and which rule instead.
"""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Sequence

from orchestrator.contract import Outcome
from orchestrator.contract import Rendezvous as RendezvousDoc
from orchestrator.providers.tencent.storage import ObjectStore

from .errors import AttemptEnded
from .launch import Rendezvous
from .metadata import Metadata, MetadataError
from .retry import retrying
from .stop import StopSignal

log = logging.getLogger(__name__)

WAIT_SECONDS = 900.0  # other nodes may boot minutes after node 0


def free_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


ADDRESS_LOOKS = 5  # the metadata service may be slow to answer a busy host


def node_address(metadata: Metadata) -> str:
    for look in range(1, ADDRESS_LOOKS + 1):
        try:
            address = metadata.get("local-ipv4")
            break
        except MetadataError as exc:
            if look == ADDRESS_LOOKS:
                raise AttemptEnded(Outcome.AGENT_ERROR, f"the metadata service did not answer: {exc}") from exc
            time.sleep(look)
    if not address:
        raise AttemptEnded(Outcome.AGENT_ERROR, "the metadata service gave no local-ipv4 for the rendezvous")
    return address


def publish(store: ObjectStore, key: str, metadata: Metadata, instance_id: str) -> Rendezvous:
    host = node_address(metadata)
    port = free_port(host)
    doc = RendezvousDoc(host=host, port=port, instance_id=instance_id)
    retrying("publish the rendezvous", lambda: store.put_json(key, doc.model_dump(mode="json")))
    log.info("rendezvous published: %s:%d", host, port)
    return Rendezvous(host, port, is_host=True)


def wait_for(store: ObjectStore, key: str, stop: StopSignal, timeout: float = WAIT_SECONDS) -> Rendezvous:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        stop.check()
        doc = retrying("read the rendezvous", lambda: store.get_json(key))
        if doc is not None:
            found = RendezvousDoc.model_validate(doc)
            log.info("rendezvous found: %s:%d (node 0 is %s)", found.host, found.port, found.instance_id)
            return Rendezvous(found.host, found.port, is_host=False)
        stop.event.wait(2.0)
    raise AttemptEnded(Outcome.AGENT_ERROR, f"node 0 published no rendezvous within {timeout:.0f} s")


PROBE_SECONDS = 5.0  # a connection not answered by then was dropped
DROPPED_LOOKS = 3  # in a row, before the attempt ends: one lost SYN is not a rule


def reach(rdzv: Rendezvous, node: int, groups: Sequence[str], stop: StopSignal,
          timeout: float = WAIT_SECONDS) -> None:
    """Return once node 0's store at ``rdzv`` accepts a connection; AttemptEnded when the connections are dropped
    (``groups``: the instances' security groups, named in the error) or nothing answers within ``timeout``."""
    deadline, dropped = time.monotonic() + timeout, 0
    while True:
        stop.check()
        try:
            with socket.create_connection((rdzv.host, rdzv.port), timeout=PROBE_SECONDS):
                return
        except TimeoutError:
            dropped += 1
            if dropped >= DROPPED_LOOKS:
                raise AttemptEnded(Outcome.PREFLIGHT_FAILED, dropped_by(rdzv, node, groups)) from None
        except OSError as exc:  # refused: node 0's torchrun does not listen yet
            dropped = 0
            log.debug("rendezvous %s:%d not answering yet: %s", rdzv.host, rdzv.port, exc)
        if time.monotonic() > deadline:
            raise AttemptEnded(Outcome.AGENT_ERROR, f"node 0's rendezvous {rdzv.host}:{rdzv.port} did not answer "
                                                    f"within {timeout:.0f} s")
        stop.event.wait(1.0)


def dropped_by(rdzv: Rendezvous, node: int, groups: Sequence[str]) -> str:
    """The one line that ends an attempt whose nodes cannot reach each other."""
    named = ", ".join(groups) or "the instances' security groups"
    rule = (f"add an inbound rule to {groups[0]} from {groups[0]} itself, protocol ALL, action ACCEPT"
            if groups else "add an inbound rule that admits the group's own members, protocol ALL")
    return (f"node {node} cannot reach node 0's rendezvous at {rdzv.host}:{rdzv.port}: the connection is dropped, "
            f"so {named} do not admit the job's nodes to each other. {rule} (or leave network.security_groups "
            "unset: cvmjob's own group admits its members)")
