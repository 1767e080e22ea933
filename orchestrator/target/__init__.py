"""Which cloud a job runs on and how to reach it: Tencent Cloud with the user's keys, or the embedded emulator."""

from .resolve import Target, TargetError, connect, in_ci, reconnect, refuse_silent_emulator, resolve

__all__ = ["Target", "TargetError", "connect", "in_ci", "reconnect", "refuse_silent_emulator", "resolve"]
