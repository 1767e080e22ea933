"""Ending a client's connection the way a network failure would: shared by the API 3.0 front (a dropped response)
and COS (a body reset mid-transfer)."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
from typing import NoReturn

from aiohttp import web


def reset_connection(request: web.Request) -> NoReturn:
    """Reset the TCP connection (RST, not FIN): the client sees ECONNRESET, as after a dropped response. The
    handler ends here: nothing more can be said on a connection just reset."""
    transport = request.transport
    if transport is not None:
        sock = transport.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        transport.abort()
    raise asyncio.CancelledError
