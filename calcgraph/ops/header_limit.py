"""uvicorn's HTTP protocol with the contract's header limit (section 2: 431
`RequestHeaderFieldsTooLarge`, request headers over 16 KiB in all, refused before they are read).

httptools, the parser of uvicorn[standard], has no header limit and buffers a header value
until it ends: a 60 MB Authorization header was read whole. This protocol counts the bytes of a
request's head as they arrive and feeds the parser no more than the limit allows; a head that
has not ended by then is answered 431 and the connection closed. Bodies pass uncounted.

It also writes each response's head and body as one send (`_OneSend`): uvicorn writes the
head when the application starts the response and the body when it sends it, two system calls
and two TCP segments for the client to read, most of a small answer's cost in the kernel (a
polled tick's answer is a few hundred bytes). A big body is written as it is, not joined.

`calcgraph serve`, the demo and the bench server name it (`http=HTTP_PROTOCOL`).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

HTTP_PROTOCOL = "calcgraph.ops.header_limit:HeaderLimitProtocol"
MAX_HEADER_BYTES = 16 * 1024
# The request line is not a header: a long query string gets this much room beside them.
MAX_URL_BYTES = 8 * 1024
_REQUEST_LINE_SLACK = 64  # method, spaces, "HTTP/1.1", line ends
JOIN_MAX_BYTES = 64 * 1024
"""A piece of a response longer than this leaves in a write of its own rather than joined to
its head: joining copied every big answer once more on the event loop, outside the request's
metered steps (the soak of issue 27 read 8 and 24 MiB answers over and over: 151 of 2,546
samples of the loop were that copy), where one more system call costs nothing beside it."""

_BODY = json.dumps(
    {
        "detail": "RequestHeaderFieldsTooLarge: the request headers are over "
        f"{MAX_HEADER_BYTES} bytes in all; send shorter headers (an access token is at most "
        f"{MAX_HEADER_BYTES} bytes)"
    }
).encode()
_RESPONSE = (
    b"HTTP/1.1 431 Request Header Fields Too Large\r\n"
    b"content-type: application/json\r\n"
    b"content-length: " + str(len(_BODY)).encode() + b"\r\n"
    b"connection: close\r\n\r\n" + _BODY
)


class _OneSend:
    """The transport as one request's response cycle writes to it: what it writes in one step
    of the event loop goes out in one write at the end of that step (a response's head and
    body, sent one after the other without a wait between them, leave as one send); a close
    writes what is pending first. Everything else is the transport's own."""

    __slots__ = ("_loop", "_pending", "transport")

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self.transport = transport
        self._loop = loop
        self._pending: list[bytes] = []

    def write(self, data: bytes) -> None:
        if not data:
            return
        if not self._pending:
            self._loop.call_soon(self._flush)
        self._pending.append(bytes(data))

    def _flush(self) -> None:
        pending, self._pending = self._pending, []
        if not pending or self.transport.is_closing():
            return
        if len(pending) == 1:
            self.transport.write(pending[0])
            return
        # Small pieces are joined; a big one is written as it is, after those before it.
        joined: list[bytes] = []
        for piece in pending:
            if len(piece) <= JOIN_MAX_BYTES:
                joined.append(piece)
                continue
            if joined:
                self.transport.write(b"".join(joined))
                joined = []
            self.transport.write(piece)
        if joined:
            self.transport.write(b"".join(joined))

    def close(self) -> None:
        self._flush()
        self.transport.close()

    def is_closing(self) -> bool:
        return self.transport.is_closing()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.transport, name)


class HeaderLimitProtocol(HttpToolsProtocol):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.url = b""  # set by the parser's first callback; read here before that
        self._head_bytes = 0
        self._in_head = True

    def on_headers_complete(self) -> None:
        self._in_head = False
        cycle = self.cycle
        super().on_headers_complete()
        if self.cycle is not None and self.cycle is not cycle:  # this request's (not an upgrade)
            self.cycle.transport = _OneSend(self.transport, self.loop)  # type: ignore[assignment]

    def on_message_complete(self) -> None:
        super().on_message_complete()
        # Keep-alive: the next bytes on this connection are the next request's head.
        self._head_bytes = 0
        self._in_head = True

    def data_received(self, data: bytes) -> None:
        while data:
            if not self._in_head:
                super().data_received(data)
                return
            limit = MAX_HEADER_BYTES + min(len(self.url), MAX_URL_BYTES) + _REQUEST_LINE_SLACK
            room = limit - self._head_bytes
            if room <= 0:
                self._refuse()
                return
            # Feed no more than the limit allows, then see whether the head ended within it.
            piece, data = data[:room], data[room:]
            self._head_bytes += len(piece)
            super().data_received(piece)
            transport = self.transport
            if transport.is_closing():
                return
            protocol = transport.get_protocol()
            if protocol is not self:  # upgraded to a WebSocket: the rest is its first frames
                if data:
                    protocol.data_received(data)  # type: ignore[attr-defined]
                return

    def _refuse(self) -> None:
        self.logger.warning("refused a request whose headers are over %d bytes", MAX_HEADER_BYTES)
        self.transport.write(_RESPONSE)
        self.transport.close()
