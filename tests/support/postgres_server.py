"""A private PostgreSQL cluster for the tests: ``initdb`` and ``pg_ctl`` in a temp dir.

Never a system service: Debian's ``postgresql`` package provides the binaries
(``/usr/lib/postgresql/*/bin``); the cluster lives in a temporary directory owned by the
``postgres`` user (``runuser -u postgres --`` when the tests run as root), listens on a
free port of 127.0.0.1 and on a unix socket in that directory, trusts local
connections, and is stopped and removed at the end. Without the binaries the tests that
need it are skipped, saying why, unless ``CI`` is set: then they fail.

Test modules use it with ``pytest_plugins = ["tests.support.postgres_server"]`` and the
``postgres_server`` fixture (one cluster per test process).
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

__all__ = ["PostgresServer", "find_bindir", "postgres_server"]


def find_bindir() -> Path | None:
    """The newest ``/usr/lib/postgresql/<version>/bin`` that has ``initdb``, or ``None``."""
    found = [Path(path).parent for path in glob.glob("/usr/lib/postgresql/*/bin/initdb")]
    found.sort(key=lambda path: int(path.parent.name) if path.parent.name.isdigit() else 0)
    return found[-1] if found else None


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


class PostgresServer:
    """One cluster: ``start``, ``database()`` (a ``DATABASES`` entry), ``stop``."""

    def __init__(self, bindir: Path) -> None:
        self.bindir = bindir
        self.port = _free_port()
        # A short path: a unix socket's path has a limit of about 100 bytes.
        self.dir = Path(tempfile.mkdtemp(prefix="ledger-pg-"))
        self.data = self.dir / "data"
        self.log = self.dir / "server.log"
        self._as_postgres = os.geteuid() == 0

    def _run(self, *command: str) -> None:
        prefix = ["runuser", "-u", "postgres", "--"] if self._as_postgres else []
        done = subprocess.run(
            [*prefix, *command], capture_output=True, text=True, timeout=120, cwd=self.dir
        )
        if done.returncode != 0:
            log = self.log.read_text(errors="replace") if self.log.exists() else ""
            raise RuntimeError(
                f"{' '.join(command)} exited {done.returncode}:\n{done.stdout}{done.stderr}{log}"
            )

    def start(self) -> None:
        if self._as_postgres:
            shutil.chown(self.dir, "postgres", "postgres")
        self._run(
            str(self.bindir / "initdb"),
            "-D",
            str(self.data),
            "-U",
            "postgres",
            "--auth=trust",
            "--encoding=UTF8",
            "--no-sync",
        )
        options = (
            f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1 "
            "-c fsync=off -c synchronous_commit=off -c full_page_writes=off "
            "-c max_connections=100"
        )
        self._run(
            str(self.bindir / "pg_ctl"),
            "-D",
            str(self.data),
            "-l",
            str(self.log),
            "-o",
            options,
            "-w",
            "-t",
            "60",
            "start",
        )

    def database(self, name: str = "postgres") -> dict[str, Any]:
        """A ``DATABASES`` entry for database ``name`` (through the unix socket)."""
        return {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": name,
            "USER": "postgres",
            "HOST": str(self.dir),
            "PORT": str(self.port),
        }

    def dsn(self, name: str = "postgres") -> str:
        return f"host={self.dir} port={self.port} user=postgres dbname={name}"

    def stop(self) -> None:
        try:
            if (self.data / "postmaster.pid").exists():
                self._run(
                    str(self.bindir / "pg_ctl"),
                    "-D",
                    str(self.data),
                    "-m",
                    "immediate",
                    "-w",
                    "stop",
                )
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """A private cluster for this test process, stopped and removed at the end."""
    bindir = find_bindir()
    if bindir is None:
        reason = (
            "PostgreSQL is not installed (no /usr/lib/postgresql/*/bin/initdb): "
            "apt-get install postgresql to run the PostgreSQL tests"
        )
        if os.environ.get("CI"):
            pytest.fail(f"{reason} (CI is set, so this is a failure)")
        pytest.skip(reason)
    try:
        import psycopg  # noqa: F401
    except ImportError:
        message = "psycopg is not installed: pip install 'psycopg[binary]' (the test extra)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    server = PostgresServer(bindir)
    try:
        server.start()
        yield server
    finally:
        server.stop()
