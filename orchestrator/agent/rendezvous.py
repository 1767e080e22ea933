"""Multi-node rendezvous through COS: node 0 publishes where its c10d store listens (rendezvous.json), the
other nodes wait for it.

Node 0's address is its private IP (metadata ``local-ipv4``); where instances share one machine's loopback (the
emulator, host.py) it is 127.0.0.1. The port is one the OS reports free right now (a tiny race with other programs is
accepted: torchrun then fails, visibly). A node-0 agent that restarts publishes a new endpoint; nodes already
training with the old one fail in torchrun and the attempt is retried by the controller.
"""

from __future__ import annotations

import logging
import socket
import time

from orchestrator.contract import Outcome
from orchestrator.contract import Rendezvous as RendezvousDoc
from orchestrator.providers.tencent.storage import ObjectStore

from . import host
from .errors import AttemptEnded
from .launch import Rendezvous
from .metadata import Metadata
from .retry import retrying
from .stop import StopSignal

log = logging.getLogger(__name__)

WAIT_SECONDS = 900.0  # other nodes may boot minutes after node 0


def free_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def node_address(metadata: Metadata) -> str:
    if host.current().loopback_only:
        return "127.0.0.1"
    address = metadata.get("local-ipv4")
    if not address:
        raise AttemptEnded(Outcome.AGENT_ERROR, "the metadata service gave no local-ipv4 for the rendezvous")
    return address


def publish(store: ObjectStore, key: str, metadata: Metadata, instance_id: str) -> Rendezvous:
    host = node_address(metadata)
    port = free_port("127.0.0.1" if host == "127.0.0.1" else "0.0.0.0")
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
