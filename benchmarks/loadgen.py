"""A lean HTTPS load generator for the webhook benchmarks: open loop at a fixed rate, or closed loop at saturation.

    python benchmarks/loadgen.py URL BODIES --rate 500 --duration 10 [--connections 256]
    python benchmarks/loadgen.py URL BODIES --saturate 64 --duration 10

BODIES is a file of request bodies, each a 4-byte big-endian length and the bytes (``write_bodies``); request i
POSTs body i modulo their count, as ``application/json``, over HTTP/1.1 keep-alive connections (TLS, certificate
not checked: loopback only). Prints one JSON line: requests, errors (answers other than 200, broken connections),
the rate achieved, and p50/p99/p99.9/max latency in ms.

Why not aiohttp's client: it spends ~0.5 ms of CPU per request, so at 500 req/s the generator took half of one of
the machine's two cores and its own event loop's delays showed up as the servers' latency (the bare server's p99
was tens of ms). This one writes a prebuilt request on an asyncio transport and reads the answer with a
Content-Length parser in ``data_received``: ~60 us per request. It runs as a process of its own, so that it can be
pinned (taskset) apart from the server.

Open loop: request i is due at start + i/rate, whatever happened to the others; it goes out on an idle connection
(a new one while fewer than --connections are open, else it waits for one), and its latency runs from when it was
due, so queueing anywhere (the generator included) counts: no coordinated omission. A run whose generator fell
behind its schedule says so (``behindMs``: the largest lateness of a send, which a healthy run keeps under a
millisecond or two).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import ssl
import struct
import sys
import time
from collections import deque
from pathlib import Path
from urllib.parse import urlsplit


def write_bodies(path: str | Path, bodies: list[bytes]) -> None:
    with open(path, "wb") as fh:
        for b in bodies:
            fh.write(struct.pack(">I", len(b)))
            fh.write(b)


def read_bodies(path: str | Path) -> list[bytes]:
    data = Path(path).read_bytes()
    out, i = [], 0
    while i < len(data):
        (n,) = struct.unpack_from(">I", data, i)
        out.append(data[i + 4:i + 4 + n])
        i += 4 + n
    return out


class Conn(asyncio.Protocol):
    """One keep-alive connection with at most one request in flight."""

    def __init__(self, gen: Generator) -> None:
        self.gen = gen
        self.transport: asyncio.Transport | None = None
        self.buf = bytearray()
        self.due = 0.0  # when the request in flight was due (0: none in flight)
        self.need = -1  # bytes of the whole answer, once its head is read
        self.status = 0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def send(self, request: bytes, due: float) -> None:
        self.due = due
        assert self.transport is not None
        self.transport.write(request)

    def data_received(self, data: bytes) -> None:
        self.buf += data
        if self.need < 0:
            end = self.buf.find(b"\r\n\r\n")
            if end < 0:
                return
            head = bytes(self.buf[:end]).lower()
            length = 0
            for line in head.split(b"\r\n")[1:]:
                name, _, value = line.partition(b":")
                if name == b"content-length":
                    length = int(value)
            self.status = int(head[9:12])
            self.need = end + 4 + length
        if len(self.buf) >= self.need:
            del self.buf[:self.need]
            self.need = -1
            due, self.due = self.due, 0.0
            self.gen.done(self, due, self.status == 200)

    def connection_lost(self, exc: Exception | None) -> None:
        self.gen.lost(self)


class Generator:
    def __init__(self, host: str, port: int, path: str, bodies: list[bytes], connections: int) -> None:
        self.host, self.port = host, port
        self.requests = [f"POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
                         f"Content-Length: {len(b)}\r\n\r\n".encode() + b for b in bodies]
        self.ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        self.ctx.check_hostname, self.ctx.verify_mode = False, ssl.CERT_NONE
        self.max = connections
        self.idle: deque[Conn] = deque()
        self.open = 0
        self.waiting: deque[tuple[int, float]] = deque()  # (request index, when it was due)
        self.latencies: list[float] = []
        self.errors = 0
        self.finished = asyncio.Event()
        self.expected = 0
        self.next_index = 0  # closed loop: the next body
        self.tasks: set[asyncio.Future[None]] = set()

    def loop(self) -> asyncio.AbstractEventLoop:
        return asyncio.get_running_loop()

    def submit(self, i: int, due: float) -> None:
        if self.idle:
            self.idle.pop().send(self.requests[i % len(self.requests)], due)
            return
        self.waiting.append((i, due))
        if self.open < self.max:
            self.open += 1
            task = asyncio.ensure_future(self._connect())
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)

    async def _connect(self) -> None:
        try:
            _t, conn = await self.loop().create_connection(lambda: Conn(self), self.host, self.port, ssl=self.ctx,
                                                           server_hostname=self.host)
        except OSError:
            self.open -= 1
            if self.waiting:
                self.waiting.popleft()
                self._count(0.0, False)
            return
        self._idle(conn)

    def _idle(self, conn: Conn) -> None:
        if self.waiting:
            i, due = self.waiting.popleft()
            conn.send(self.requests[i % len(self.requests)], due)
        else:
            self.idle.append(conn)

    def _count(self, due: float, ok: bool) -> None:
        now = self.loop().time()
        self.latencies.append(now - due if due else 0.0)
        self.errors += not ok
        if len(self.latencies) >= self.expected:
            self.finished.set()

    def done(self, conn: Conn, due: float, ok: bool) -> None:
        self._count(due, ok)
        self._idle(conn)

    def lost(self, conn: Conn) -> None:
        self.open -= 1
        if conn in self.idle:
            self.idle.remove(conn)
        if conn.due:
            self._count(conn.due, False)

    async def warm(self, connections: int) -> None:
        """Opens ``connections`` before the clock starts: a TLS handshake costs both sides a few ms of CPU, and a
        schedule that opened them on its first requests would measure the handshakes' queue, not the server."""
        for _ in range(connections):
            self.open += 1
            await self._connect()

    async def fixed_rate(self, rate: float, duration: float) -> float:
        """Sends ``rate * duration`` requests on schedule; the largest lateness of a send (s)."""
        loop = self.loop()
        await self.warm(min(self.max, max(4, int(rate * 0.02))))  # 20 ms of requests in flight before one waits
        total = int(rate * duration)
        self.expected = total
        start = loop.time() + 0.05
        behind, i = 0.0, 0
        while i < total:
            now = loop.time()
            while i < total and start + i / rate <= now:
                due = start + i / rate
                behind = max(behind, now - due)
                self.submit(i, due)
                i += 1
            if i < total:
                await asyncio.sleep(max(0.0, start + i / rate - loop.time()))
        await asyncio.wait_for(self.finished.wait(), 60)
        return behind

    async def saturate(self, concurrency: int, duration: float) -> None:
        loop = self.loop()
        end = loop.time() + duration
        self.expected = 1 << 62

        def again(conn: Conn, due: float, ok: bool) -> None:
            self._count(due, ok)
            if loop.time() < end:
                conn.send(self.requests[self.next_index % len(self.requests)], loop.time())
                self.next_index += 1
            else:
                self.finished.set()

        self.done = again  # type: ignore[method-assign]
        conns = []
        for _ in range(concurrency):
            _t, conn = await loop.create_connection(lambda: Conn(self), self.host, self.port, ssl=self.ctx,
                                                    server_hostname=self.host)
            conns.append(conn)
        end = loop.time() + duration
        for conn in conns:
            conn.send(self.requests[self.next_index % len(self.requests)], loop.time())
            self.next_index += 1
        await asyncio.sleep(duration)
        for conn in conns:
            if conn.transport is not None:
                conn.transport.close()


def summary(latencies: list[float], errors: int, seconds: float) -> dict[str, float | int]:
    lat = sorted(latencies)
    n = len(lat)

    def pct(q: float) -> float:
        return round(lat[min(n - 1, max(0, int(n * q) - 1))] * 1000, 3) if n else float("nan")

    return {"n": n, "errors": errors, "achieved": round(n / seconds, 1) if seconds else 0.0,
            "p50": pct(0.5), "p99": pct(0.99), "p999": pct(0.999), "max": pct(1.0)}


async def amain(args: argparse.Namespace) -> dict[str, float | int]:
    url = urlsplit(args.url)
    gen = Generator(url.hostname or "127.0.0.1", url.port or 443, url.path or "/", read_bodies(args.bodies),
                    args.connections)
    t = time.perf_counter()
    if args.saturate:
        await gen.saturate(args.saturate, args.duration)
        out = summary(gen.latencies, gen.errors, args.duration)
    else:
        behind = await gen.fixed_rate(args.rate, args.duration)
        out = summary(gen.latencies, gen.errors, time.perf_counter() - t)
        out["behindMs"] = round(behind * 1000, 2)
        out["rate"] = args.rate
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("url")
    ap.add_argument("bodies")
    ap.add_argument("--rate", type=float, default=500.0)
    ap.add_argument("--duration", type=float, default=10.0)
    ap.add_argument("--connections", type=int, default=256, help="open loop: connections at most")
    ap.add_argument("--saturate", type=int, default=0, metavar="N", help="closed loop on N connections instead")
    args = ap.parse_args()
    print(json.dumps(asyncio.run(amain(args))), flush=True)
    sys.exit(0)


if __name__ == "__main__":
    main()
