"""Settings of one emulated cloud: account, keys, timings, where state lives."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

# Documented defaults (README "The local Tencent Cloud"). Shaped like real ones: a SecretId is "AKID" + 32
# characters, an APPID 10 digits, a root account UIN 12 digits. There is no default SecretKey: it opens code
# execution as the emulator's user, so each emulator has its own (keys.py).
DEFAULT_SECRET_ID = "AKIDcvmjobEmulator0000000000000000"
DEFAULT_APPID = "1250000000"
DEFAULT_UIN = "100000000001"
DEFAULT_REGION = "ap-guangzhou"
# Where a SecretKey given to the emulator (its server, or `seed` as a client) is read from (keys.py); here, in this
# light module, for the help of `cvmjob emulator`, which imports nothing else of the emulator until it runs.
KEY_VARIABLE = "TENCENTCLOUD_EMULATOR_SECRET_KEY"


@dataclass(frozen=True)
class EmulatorConfig:
    state_dir: Path
    secret_key: str  # the account's long-term key, also the admin API's bearer (keys.py)
    host: str = "127.0.0.1"
    port: int = 0
    # Folders the admin ``seed`` may read (absolute, resolved); none: seeding is refused.
    seed_roots: tuple[Path, ...] = ()
    secret_id: str = DEFAULT_SECRET_ID
    appid: str = DEFAULT_APPID
    uin: str = DEFAULT_UIN
    # Seconds of emulated time an instance spends in PENDING, TERMINATING, STOPPING/STARTING, and an image in
    # CREATING. Real GPU instances take minutes; tests want seconds.
    boot_seconds: float = 2.0
    terminate_seconds: float = 1.0
    stop_seconds: float = 1.0
    image_seconds: float = 2.0
    # Seconds the GPU driver's auto-install takes (mirror.py); Tencent's takes about 10 minutes.
    driver_install_seconds: float = 1.0
    # How long a terminated instance stays visible as TERMINATING is terminate_seconds; after that it is gone.
    spot_notice_seconds: float = 120.0
    # Seeded random reclaims: mean spot reclaims per instance-hour of emulated time (0 = only by admin call).
    spot_reclaim_rate: float = 0.0
    seed: int = 0
    # Money on the account at first start, in 分 (0.01 CNY).
    initial_balance_fen: int = 10_000_000
    # The interpreter that plays the "public image": its packages are what an instance finds installed.
    image_python: str = field(default_factory=lambda: sys.executable)
    # "auto" maps instance GPUs onto real CUDA devices when nvidia-smi lists some; "none" forces CPU-only.
    gpus: str = "auto"
    # "real": emulated time follows the wall clock (plus admin advances); "manual": it moves only by advances.
    clock: str = "real"
    # Validity of the STS tokens the metadata service hands out for an instance's CAM role.
    role_credential_seconds: int = 7200
    # False: the load-test mode (``serve --no-user-data``, admin ``PUT settings``): a boot starts no process at all,
    # neither the per-boot scripts nor the UserData; everything else about instances is unchanged.
    run_user_data: bool = True
    # Seconds between writes of the state file at most (``serve --state-save-seconds``); 0: after every change.
    state_save_seconds: float = 0.0

    @property
    def endpoint(self) -> str:
        return f"{self.host}:{self.port}"
