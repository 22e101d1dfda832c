"""A throwaway redis-server for tests: own port, own directory, never port 6379.

``RedisServer().start()`` runs one on a free loopback port in a temporary directory;
``stop`` and ``cleanup`` (or a ``with`` block) end it and delete the directory, and a
server still running when the process exits is stopped then. ``unixsocket=True`` also
listens on a socket in the server's directory. The binary is ``$REDIS_SERVER_BIN`` or the
``redis-server`` on ``PATH``; without one, ``RedisServerError`` says how to get one.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

import redis

# Redis's usual port: a developer's own Redis lives there, so tests never use it.
FORBIDDEN_PORT = 6379
START_TIMEOUT = 10.0
STOP_TIMEOUT = 10.0
PORT_ATTEMPTS = 5
# sun_path holds 108 bytes on Linux (104 on macOS), its terminating NUL included.
UNIX_PATH_MAX = 100

# Strong references: a server whose object was dropped must still be stopped at exit.
_LIVE: set[RedisServer] = set()


class RedisServerError(RuntimeError):
    """The test redis-server could not be found, started or reached."""


class _PortTaken(Exception):
    """Another process bound the chosen port first."""


def find_binary() -> str:
    """Return the redis-server to run: ``$REDIS_SERVER_BIN`` or the one on ``PATH``."""
    configured = os.environ.get("REDIS_SERVER_BIN")
    if configured:
        if not os.access(configured, os.X_OK):
            raise RedisServerError(f"REDIS_SERVER_BIN={configured!r} is not an executable file")
        return configured
    found = shutil.which("redis-server")
    if found is None:
        raise RedisServerError(
            "no redis-server found: install Redis (apt install redis-server, "
            "brew install redis) or set REDIS_SERVER_BIN to its path"
        )
    return found


def free_port() -> int:
    """Return a loopback port that nothing listened on a moment ago."""
    while True:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind(("127.0.0.1", 0))
            port: int = sock.getsockname()[1]
        if port != FORBIDDEN_PORT:
            return port


def _die_with_parent() -> None:
    # Linux only: if the test process is killed outright (a CI timeout, SIGKILL),
    # the kernel takes the server down with it instead of leaking it.
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        pr_set_pdeathsig = 1
        libc.prctl(pr_set_pdeathsig, signal.SIGKILL)
    except Exception:  # best effort: atexit still covers clean exits
        pass


class RedisServer:
    """One redis-server process bound to 127.0.0.1, with a directory it owns."""

    def __init__(
        self,
        *,
        appendonly: bool = False,
        appendfsync: str = "always",
        port: int | None = None,
        unixsocket: bool = False,
        extra_args: Sequence[str] = (),
    ) -> None:
        if port == FORBIDDEN_PORT:
            raise ValueError(f"port {FORBIDDEN_PORT} is Redis's usual port: tests never use it")
        self.appendonly = appendonly
        self.appendfsync = appendfsync
        self.unixsocket = unixsocket
        self.extra_args = tuple(extra_args)
        self._port = port
        self._pinned = port is not None
        self._dir: Path | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._paused = False

    # -- addresses -----------------------------------------------------------

    @property
    def port(self) -> int:
        if self._port is None:
            raise RedisServerError("the server has no port until it is started")
        return self._port

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    @property
    def socket_path(self) -> Path:
        """The unix socket the server also listens on (``unixsocket=True``)."""
        if not self.unixsocket:
            raise RedisServerError("the server was not started with unixsocket=True")
        return self.dir / "redis.sock"

    @property
    def unix_url(self) -> str:
        return f"unix://{self.socket_path}"

    @property
    def dir(self) -> Path:
        if self._dir is None:
            self._dir = Path(tempfile.mkdtemp(prefix="ledger-redis-"))
        return self._dir

    @property
    def pid(self) -> int | None:
        process = self._process
        return process.pid if process is not None and process.poll() is None else None

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def client(self, **kwargs: Any) -> redis.Redis:
        """Return a new redis-py client on this server; ``kwargs`` go to ``from_url``."""
        return redis.Redis.from_url(self.url, **kwargs)

    # -- lifecycle -----------------------------------------------------------

    def start(self) -> RedisServer:
        """Start the server and wait until it answers PING as itself."""
        if self.running:
            return self
        # A port chosen here may be taken by someone else before redis binds it:
        # choose again. A pinned port (given, or kept for a restart) is not moved,
        # because clients already hold its URL.
        attempts = 1 if self._pinned else PORT_ATTEMPTS
        for attempt in range(attempts):
            if not self._pinned:
                self._port = free_port()
            try:
                self._spawn()
                return self
            except _PortTaken:
                if attempt == attempts - 1:
                    raise RedisServerError(
                        f"port {self._port} is taken:\n{self._log_tail()}"
                    ) from None
        raise AssertionError("unreachable")

    def restart(self) -> RedisServer:
        """Start again on the same port and directory, so an AOF is replayed."""
        if self.running:
            self.stop()
        self._pinned = True
        return self.start()

    def pause(self) -> None:
        """Stop the server with SIGSTOP: it keeps its sockets and answers nothing.

        The kernel still accepts connections into its listen backlog, so clients
        connect and then wait for replies that do not come, as with a stalled host.
        """
        process = self._process
        if process is None or process.poll() is not None:
            raise RedisServerError("only a running server can be paused")
        process.send_signal(signal.SIGSTOP)
        self._paused = True

    def resume(self) -> None:
        """Continue a paused server (SIGCONT); it answers what waited meanwhile."""
        process = self._process
        if self._paused and process is not None and process.poll() is None:
            process.send_signal(signal.SIGCONT)
        self._paused = False

    def stop(self) -> None:
        """Shut down gracefully (SIGTERM: flushes the AOF, writes no RDB)."""
        process = self._process
        if process is None:
            return
        self.resume()  # a paused process would hold SIGTERM until continued
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                # A busy script delays a graceful shutdown; the test is over anyway.
                process.kill()
                process.wait()

    def kill(self) -> None:
        """Kill the server with SIGKILL, as a crash would: nothing is flushed."""
        process = self._process
        if process is None:
            return
        if process.poll() is None:
            process.kill()
            process.wait()
        self._paused = False

    def cleanup(self) -> None:
        """Stop the server if it runs and delete its directory."""
        self.kill()
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None
        _LIVE.discard(self)

    def __enter__(self) -> RedisServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
        self.cleanup()

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        return f"<RedisServer port={self._port} {state} dir={self._dir}>"

    # -- internals -----------------------------------------------------------

    def _command(self) -> list[str]:
        return [
            find_binary(),
            "--port", str(self.port),
            "--bind", "127.0.0.1",
            "--save", "",
            "--dir", str(self.dir),
            "--appendonly", "yes" if self.appendonly else "no",
            "--appendfsync", self.appendfsync,
            "--daemonize", "no",
            "--logfile", "redis.log",
            *self._unixsocket_args(),
            *self.extra_args,
        ]  # fmt: skip

    def _unixsocket_args(self) -> list[str]:
        if not self.unixsocket:
            return []
        path = str(self.socket_path)
        if len(path.encode()) > UNIX_PATH_MAX:
            raise RedisServerError(f"unix socket path {path!r} is too long; set a shorter TMPDIR")
        return ["--unixsocket", path, "--unixsocketperm", "700"]

    def _spawn(self) -> None:
        output = (self.dir / "stdout.log").open("ab")
        try:
            self._process = subprocess.Popen(
                self._command(),
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=subprocess.STDOUT,
                cwd=self.dir,
                preexec_fn=_die_with_parent if sys.platform == "linux" else None,
            )
        finally:
            output.close()
        _LIVE.add(self)
        self._wait_until_ready()

    def _wait_until_ready(self) -> None:
        assert self._process is not None
        deadline = time.monotonic() + START_TIMEOUT
        probe = self.client(socket_connect_timeout=0.5, socket_timeout=2)
        try:
            while time.monotonic() < deadline:
                if self._process.poll() is not None:
                    if "Address already in use" in self._log_tail():
                        raise _PortTaken
                    raise RedisServerError(
                        f"redis-server exited with {self._process.returncode} on port "
                        f"{self._port}:\n{self._log_tail()}"
                    )
                try:
                    # PING fails with LOADING until an AOF is replayed; and another
                    # server may answer on this port, so only our own pid counts.
                    probe.ping()
                    if int(probe.info("server")["process_id"]) == self._process.pid:
                        return
                except (redis.ConnectionError, redis.TimeoutError, redis.BusyLoadingError):
                    pass
                time.sleep(0.02)
        finally:
            probe.close()
        self.kill()
        raise RedisServerError(
            f"redis-server did not answer on port {self._port} within {START_TIMEOUT:.0f} s:\n"
            f"{self._log_tail()}"
        )

    def _log_tail(self, lines: int = 30) -> str:
        parts: list[str] = []
        for name in ("stdout.log", "redis.log"):
            path = self.dir / name
            with contextlib.suppress(OSError):
                text = path.read_text(errors="replace").splitlines()[-lines:]
                if text:
                    parts.append(f"--- {path} ---\n" + "\n".join(text))
        return "\n".join(parts) or "(no log output)"


def delete_namespace(client: redis.Redis, namespace: str) -> int:
    """Delete every key of ``namespace`` (hash-tagged ``{ns:...`` or plain ``ns:...``)."""
    deleted = 0
    for pattern in (f"{{{namespace}:*", f"{namespace}:*"):
        batch: list[bytes] = []
        for key in client.scan_iter(match=pattern, count=1000):
            batch.append(key)
            if len(batch) == 500:
                deleted += client.unlink(*batch)
                batch.clear()
        if batch:
            deleted += client.unlink(*batch)
    return deleted


@atexit.register
def _stop_leftovers() -> None:
    for server in list(_LIVE):
        server.cleanup()
