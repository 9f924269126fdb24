"""Length-prefixed frames over a socket between the parent and one worker.

Every frame is a ``codec`` frame (JSON plus raw tensor bytes), in both directions: the parent
never unpickles what a worker sends, and nothing needs pickling the other way either.
"""

from __future__ import annotations

import socket
import struct
import time
from typing import Any

from forge.verifier.protocol import codec

_CODEC = b"F"
_LEN = struct.Struct("<Q")


class ChannelClosed(Exception):
    """The other side went away (EOF), or sent something that is not a valid frame."""


class ChannelTimeout(Exception):
    """No frame arrived before the deadline."""


def _recv_into(sock: socket.socket, buf: memoryview, deadline: float | None) -> None:
    got = 0
    while got < len(buf):
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise ChannelTimeout()
            sock.settimeout(min(left, 0.5))
        else:
            sock.settimeout(None)
        try:
            n = sock.recv_into(buf[got:], min(len(buf) - got, 1 << 24))
        except TimeoutError:
            continue
        except OSError as exc:
            raise ChannelClosed(str(exc)) from exc
        if not n:
            raise ChannelClosed("EOF")
        got += n


class Channel:
    def __init__(self, sock: socket.socket, max_frame: int = 1 << 36) -> None:
        self.sock = sock
        self.max_frame = max_frame

    def send(self, obj: Any) -> None:
        parts = codec.encode_parts(obj)
        total = sum(memoryview(p).nbytes for p in parts) + 1
        self.sock.settimeout(None)
        self.sock.sendall(_LEN.pack(total) + _CODEC)
        for part in parts:
            self.sock.sendall(part)

    def recv(self, deadline: float | None = None) -> Any:
        """The next frame, decoded; raises ChannelClosed on EOF or anything malformed."""
        head = bytearray(_LEN.size + 1)
        _recv_into(self.sock, memoryview(head), deadline)
        (n,) = _LEN.unpack_from(head)
        if n < 1 or n > self.max_frame or head[_LEN.size :] != _CODEC:
            raise ChannelClosed("frame refused: not in forge's wire format")
        body = bytearray(n - 1)
        _recv_into(self.sock, memoryview(body), deadline)
        try:
            return codec.decode(body)
        except (ValueError, KeyError, TypeError, IndexError) as exc:
            raise ChannelClosed(f"malformed frame: {exc}") from exc
