"""A TCP proxy between the ledger's clients and Redis, whose faults the harness controls.

Modes, each held for a window of time and then back to ``pass``:

* ``drop``: every open connection is cut at once (both directions), and new ones are
  accepted then closed at once for the window: clients see a reset or an EOF.
* ``stall``: no byte moves in either direction for the window; a client whose
  ``socket_timeout`` is shorter gives up while its request may still reach Redis
  once the stall ends (a late, stale command).
* ``half_close``: requests still reach Redis and run, but the proxy shuts the
  direction back to the client as soon as it has forwarded one: the command ran and
  its reply is lost (the client sees "connection closed" with the outcome unknown).

Threads, not asyncio: two pump threads per connection, each waking every 20 ms to
look at the mode, so a fault takes effect on a connection stuck in a read.
"""

from __future__ import annotations

import contextlib
import select
import socket
import threading
import time

__all__ = ["MODES", "FaultProxy"]

MODES = ("pass", "drop", "stall", "half_close")
_TICK = 0.02
_CHUNK = 65536


class _Link:
    """One client connection and its upstream connection."""

    def __init__(self, client: socket.socket, upstream: socket.socket) -> None:
        self.client = client
        self.upstream = upstream
        self.reply_cut = False
        self.closed = threading.Event()

    def close(self) -> None:
        if self.closed.is_set():
            return
        self.closed.set()
        for sock in (self.client, self.upstream):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                sock.close()


class FaultProxy:
    """Listen on a free loopback port and forward to ``upstream_port``."""

    def __init__(self, upstream_port: int, host: str = "127.0.0.1") -> None:
        self.upstream = (host, upstream_port)
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind((host, 0))
        self._listener.listen(128)
        self.port: int = self._listener.getsockname()[1]
        self._mode = "pass"
        self._until = 0.0
        self._lock = threading.Lock()
        self._links: set[_Link] = set()
        self._stopping = threading.Event()
        self._acceptor: threading.Thread | None = None
        #: Connections accepted, and connections cut by a fault.
        self.accepted = 0
        self.cut = 0

    @property
    def url(self) -> str:
        return f"redis://{self.upstream[0]}:{self.port}/0"

    # -- control ----------------------------------------------------------------

    @property
    def quiet_at(self) -> float:
        """The ``time.monotonic()`` at which the last fault's window ends."""
        with self._lock:
            return self._until

    @property
    def mode(self) -> str:
        with self._lock:
            if self._mode != "pass" and time.monotonic() >= self._until:
                self._mode = "pass"
            return self._mode

    def fault(self, mode: str, seconds: float) -> None:
        """Hold ``mode`` for ``seconds``, then go back to passing bytes."""
        if mode not in MODES:
            raise ValueError(f"unknown proxy mode {mode!r}")
        with self._lock:
            self._mode = mode
            self._until = time.monotonic() + seconds
            links = list(self._links) if mode == "drop" else []
        for link in links:
            self.cut += 1
            link.close()

    def start(self) -> FaultProxy:
        self._acceptor = threading.Thread(target=self._accept, name="proxy-accept", daemon=True)
        self._acceptor.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        with contextlib.suppress(OSError):
            self._listener.close()
        with self._lock:
            links = list(self._links)
        for link in links:
            link.close()
        if self._acceptor is not None:
            self._acceptor.join(2)

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- pumps ------------------------------------------------------------------

    def _accept(self) -> None:
        while not self._stopping.is_set():
            try:
                readable, _, _ = select.select([self._listener], [], [], 0.1)
                if not readable:
                    continue
                client, _ = self._listener.accept()
            except OSError:
                return
            self.accepted += 1
            if self.mode == "drop":
                client.close()
                continue
            try:
                upstream = socket.create_connection(self.upstream, timeout=1.0)
            except OSError:
                # Redis is down: the client sees its connection closed at once.
                client.close()
                continue
            for sock in (client, upstream):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                sock.settimeout(None)
            link = _Link(client, upstream)
            with self._lock:
                self._links.add(link)
            for source, target, request in ((client, upstream, True), (upstream, client, False)):
                threading.Thread(
                    target=self._pump, args=(link, source, target, request), daemon=True
                ).start()

    def _pump(
        self, link: _Link, source: socket.socket, target: socket.socket, request: bool
    ) -> None:
        try:
            while not link.closed.is_set():
                mode = self.mode
                if mode == "stall":
                    time.sleep(_TICK)
                    continue
                readable, _, _ = select.select([source], [], [], _TICK)
                if not readable:
                    continue
                if self.mode == "stall":
                    continue
                data = source.recv(_CHUNK)
                if not data:
                    break
                if request:
                    target.sendall(data)
                    if self.mode == "half_close" and not link.reply_cut:
                        # The request goes on to Redis and runs; its reply never comes back.
                        link.reply_cut = True
                        self.cut += 1
                        with contextlib.suppress(OSError):
                            link.client.shutdown(socket.SHUT_WR)
                elif not link.reply_cut:
                    target.sendall(data)
        except OSError:
            pass
        finally:
            link.close()
            with self._lock:
                self._links.discard(link)
