"""A scripted HTTP/1.1 server in its own thread, standing in for the broker
only where the real one cannot be made to misbehave on cue: a request that
hangs forever, a stream that ends with overflow at every open. Everything
else is tested against the real broker."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import parse_qs, urlsplit

Handler = Callable[["Request"], Awaitable[None]]


class Request:
    def __init__(self, method: str, target: str, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.method = method
        u = urlsplit(target)
        self.path = u.path
        self.query = parse_qs(u.query)
        self.reader = reader
        self.writer = writer

    async def start_stream(self) -> None:
        self.writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\nMuster-Epoch: e1\r\n\r\n"
        )
        await self.writer.drain()

    async def event(self, name: str, data: Any) -> None:
        self.writer.write(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())
        await self.writer.drain()

    async def hang(self) -> None:
        """Waits until the client goes away."""
        while await self.reader.read(4096):
            pass


def marker(epoch: str, revision: int, cursor: str | None, *items: dict[str, Any]) -> dict[str, Any]:
    return {
        "epoch": epoch,
        "revision": revision,
        "subscriptions": [{"id": "sub-1", "selector": "lease://acme/r/*", "items": list(items), "next_cursor": cursor}],
    }


def wire_item(route: str, owner: str) -> dict[str, Any]:
    return {
        "route": route,
        "owner_id": owner,
        "holder_incarnation": "h-" + owner,
        "acquired_at": "2026-11-30T10:00:00Z",
        "expires_at": "2026-11-30T10:00:15Z",
        "remaining_ms": 15000,
        "renewals": 0,
    }


class FakeBroker:
    """Serves ``handler`` for every request, on a loop of its own thread."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.watches = 0
        self.open = 0
        self.max_open = 0
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.server = asyncio.run_coroutine_threadsafe(
            asyncio.start_server(self._serve, "127.0.0.1", 0), self.loop
        ).result()
        port = self.server.sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            method, target, _ = head.split(b"\r\n", 1)[0].decode().split(" ", 2)
            req = Request(method, target, reader, writer)
            if req.path == "/v1/leases/watch":
                self.watches += 1
                self.open += 1
                self.max_open = max(self.max_open, self.open)
            try:
                await self.handler(req)
            finally:
                if req.path == "/v1/leases/watch":
                    self.open -= 1
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    def close(self) -> None:
        async def stop() -> None:
            self.server.close()
            for t in asyncio.all_tasks():
                if t is not asyncio.current_task():
                    t.cancel()

        asyncio.run_coroutine_threadsafe(stop(), self.loop).result()
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join()
