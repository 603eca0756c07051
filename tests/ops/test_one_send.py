"""A response's head and body leave in one send (`calcgraph.ops.header_limit._OneSend`):
what a response cycle writes in one step of the event loop is written once at its end, in
order, and a close writes what is pending before it closes."""

from __future__ import annotations

import asyncio

from calcgraph.ops.header_limit import JOIN_MAX_BYTES, _OneSend


class _Transport:
    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.closed = False

    def write(self, data: bytes) -> None:
        assert not self.closed
        self.writes.append(data)

    def close(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed

    def get_extra_info(self, name: str) -> str:
        return f"extra {name}"


async def test_what_one_step_writes_leaves_as_one_write_in_order() -> None:
    transport = _Transport()
    one = _OneSend(transport, asyncio.get_running_loop())  # type: ignore[arg-type]
    one.write(b"HTTP/1.1 200 OK\r\n\r\n")
    one.write(b"")
    one.write(b"{}")
    assert transport.writes == []
    await asyncio.sleep(0)
    assert transport.writes == [b"HTTP/1.1 200 OK\r\n\r\n{}"]
    one.write(b"next")  # a later step: a write of its own
    await asyncio.sleep(0)
    assert transport.writes[1:] == [b"next"]
    assert one.get_extra_info("peername") == "extra peername"


async def test_a_close_writes_what_is_pending_first() -> None:
    transport = _Transport()
    one = _OneSend(transport, asyncio.get_running_loop())  # type: ignore[arg-type]
    one.write(b"head")
    one.write(b"body")
    one.close()
    assert transport.writes == [b"headbody"]
    assert transport.closed
    assert one.is_closing()
    await asyncio.sleep(0)  # the step's flush finds nothing more to write
    assert transport.writes == [b"headbody"]


async def test_a_big_body_is_written_as_it_is_not_copied_into_one_write() -> None:
    """Joining a head to a 24 MiB body copied the body on the event loop: a big piece leaves
    in a write of its own, the very object the response cycle wrote, after what came before."""
    transport = _Transport()
    one = _OneSend(transport, asyncio.get_running_loop())  # type: ignore[arg-type]
    body = b"x" * (JOIN_MAX_BYTES + 1)
    one.write(b"HTTP/1.1 200 OK\r\n")
    one.write(b"\r\n")
    one.write(body)
    one.write(b"tail")
    await asyncio.sleep(0)
    assert transport.writes == [b"HTTP/1.1 200 OK\r\n\r\n", body, b"tail"]
    assert transport.writes[1] is body
