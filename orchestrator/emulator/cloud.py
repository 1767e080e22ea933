"""The emulated cloud: every service's state, the clock, faults, and persistence under --state-dir.

A reset builds every state object anew from the config (``_open_account``); what outlives it is the emulator
itself: the config, the clock (back at the wall clock: a new account has no scheduled work that a jump must
keep in order), the host machine with its GPUs, the background work, the listening server.

All model state is touched only from the server's event-loop thread (handlers, the tick loop and admin calls
run there); background work (copying a system disk into an image, say) hands its result back to that thread.
"""

from __future__ import annotations

import itertools
import json
import os
import time
from collections import deque
from pathlib import Path
from typing import Any

from .api3 import dispatch
from .api3.dispatch import CallResult, Service
from .billing import responses as billing_api
from .billing.models import Billing
from .catalog import REGIONS
from .clock import Clock
from .config import EmulatorConfig
from .cos.service import Cos
from .cvm import responses as cvm_api
from .cvm.models import Cvm
from .iam import Iam
from .keys import private_dir
from .registry import api as tcr_api
from .registry.auth import Logins
from .registry.store import Content
from .registry.wire import Registry
from .runtime.background import Background
from .runtime.faults import Faults
from .runtime.gpus import detect
from .runtime.host import Host
from .sts import responses as sts_api
from .sts.models import WebIdentity
from .vpc import responses as vpc_api

STATE_FILE = "state.json"
STATE_VERSION = 1


class Cloud:
    def __init__(self, config: EmulatorConfig) -> None:
        self.config = config
        self.state_dir = Path(config.state_dir)
        private_dir(self.state_dir)  # it holds every STS key issued (state.json) and perhaps the account's key
        self.clock = Clock(config.clock)
        self.created_at = time.time()
        self.background = Background()
        self.host = Host(
            self.state_dir / "instances", config.endpoint, config.image_python, self.clock.now, detect(config.gpus),
            self.background,
        )
        self.host.run_user_data = config.run_user_data
        self._saved_at, self._unsaved = 0.0, False  # see save()
        self._open_account(config.seed)
        self._load()

    def _open_account(self, seed: int) -> None:
        """A new account's state: no instances, images, objects, temporary credentials, OIDC providers or roles,
        faults or charges."""
        config = self.config
        self.iam = Iam(config.secret_id, config.secret_key, config.uin, config.appid)
        self.web_identity = WebIdentity()
        self.faults = Faults(seed=seed)
        self.billing = Billing(config.initial_balance_fen)
        self.cvm = Cvm(
            config, self.clock, self.iam, self.billing, self.faults, self.host, self.state_dir / "images",
            self.background,
        )
        self.cos = Cos(self.state_dir / "cos", self.iam, config, self.clock, self.faults)
        self.registry = Registry(Content(self.state_dir / "registry"), Logins(config.uin))
        self.security_groups = self.cvm.security_groups
        self.services: dict[str, Service] = {
            s.name: s
            for s in (
                cvm_api.build(self.cvm),
                vpc_api.build(lambda: self.created_at, self.security_groups, self.clock.now, self.cvm.network,
                              lambda subnet: any(i.subnet_id == subnet for i in self.cvm.instances.values())),
                sts_api.build(self.iam, self.web_identity, self.clock.now),
                billing_api.build(self.billing, self.clock.now, config.uin),
                tcr_api.build(self.registry.logins.enterprise, self.clock.now, self._has_subnet),
            )
        }
        # Every API 3.0 call answered, newest last: tests prove what reached (or never reached) the cloud. ``seq``
        # numbers them, so that a reader can fetch only what is new (admin ``calls?since=``) and a long load test
        # can keep the whole log although only the last 10 000 are kept here.
        self.calls: deque[dict[str, Any]] = deque(maxlen=10_000)
        self._call_seq = itertools.count(1)

    def _has_subnet(self, vpc_id: str, subnet_id: str) -> bool:
        return any(s.vpc_id == vpc_id and s.subnet_id == subnet_id
                   for region in REGIONS for s in self.cvm.network.subnets(region))

    # -- API 3.0 ---------------------------------------------------------------------------------------
    def api_call(self, method: str, target: str, headers: Any, body: bytes) -> CallResult:
        self.cvm.tick(self.clock.now())  # answers reflect every transition due by now
        result = dispatch.call(
            method=method,
            target=target,
            headers=headers,
            body=body,
            services=self.services,
            iam=self.iam,
            wall_now=time.time(),
            cloud_now=self.clock.now(),
            faults=self.faults,
        )
        self.calls.append(
            {
                "seq": next(self._call_seq),
                "time": self.clock.now(),
                "service": result.service,
                "action": result.action,
                "error": result.error_code,
                "dropped": result.drop_response,
                **({} if result.params is None else {"params": result.params}),
            }
        )
        if result.mutated:
            self.save()
        return result

    # -- time ------------------------------------------------------------------------------------------
    def tick(self) -> None:
        now = self.clock.now()
        if self.cvm.tick(now) or self._unsaved:
            self.save()
        self.iam.forget_expired(now)

    def advance(self, seconds: float) -> float:
        now = self.clock.advance(seconds)
        self.tick()
        return now

    # -- persistence -----------------------------------------------------------------------------------
    def save(self) -> None:
        """Write the state file after a change. With ``config.state_save_seconds`` (load tests) at most that often:
        the rest is written by a later tick. A thousand instances make one write take about 0.1 s, and a load test
        changes something many times a second; the default (0) writes every change, so a killed emulator loses
        nothing."""
        interval = self.config.state_save_seconds
        if interval > 0 and time.monotonic() - self._saved_at < interval:
            self._unsaved = True
            return
        self._write_state()

    def _write_state(self) -> None:
        self._saved_at, self._unsaved = time.monotonic(), False
        state = {
            "version": STATE_VERSION,
            "clock": self.clock.state(),
            "iam": self.iam.to_state(),
            "account_policy": self.iam.account_state(),
            "web_identity": self.web_identity.to_state(),
            "billing": self.billing.to_state(),
            "cvm": self.cvm.to_state(),
            "security_groups": self.security_groups.to_state(),
            "default_network_removed": self.cvm.network.to_state(),
            "faults": self.faults.to_state(),
            "registry_passwords": self.registry.logins.passwords,
            "tcr": self.registry.logins.enterprise.to_state(),
        }
        path = self.state_dir / STATE_FILE
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(state, indent=1, sort_keys=True))
        os.replace(tmp, path)

    def _load(self) -> None:
        path = self.state_dir / STATE_FILE
        if not path.exists():
            return
        state = json.loads(path.read_text())
        if state.get("version") != STATE_VERSION:
            raise RuntimeError(f"{path} has state version {state.get('version')}, this emulator reads {STATE_VERSION}")
        self.clock.restore(state.get("clock", {}))
        self.iam.restore(state.get("iam", []))
        self.iam.restore_account(state.get("account_policy"))
        self.web_identity.restore(state.get("web_identity", {}))
        self.billing.restore(state.get("billing", {}))
        self.cvm.restore(state.get("cvm", {}))
        self.security_groups.restore(state.get("security_groups", []))
        self.cvm.network.restore(state.get("default_network_removed", []))
        self.faults.restore(state.get("faults", {}))
        self.registry.logins.passwords.update(state.get("registry_passwords", {}))
        self.registry.logins.enterprise.restore(state.get("tcr", {}))

    def reset(self, seed: int | None = None) -> None:
        """Back to a new account on the wall clock, with the fault seed given or the one in use. The old account's
        instances die, its images and objects are deleted."""
        self.host.reset()
        self.cvm.images.discard()
        self.cos.discard()
        self.registry.content.discard()
        self.clock.rejoin_wall_clock()
        self._open_account(self.faults.seed if seed is None else seed)
        self.save()

    def close(self) -> None:
        self.cvm.shutdown()
        self.background.join()
        self._write_state()  # whatever a save interval held back
        self.cos.close()
