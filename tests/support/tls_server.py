"""A throwaway redis-server that also listens with TLS, on a certificate made for it.

The certificate is self-signed for ``127.0.0.1``, made with the ``openssl`` CLI in the
server's own directory; the plain port stays open too (the readiness probe uses it).
Skips the test when ``openssl`` is missing or redis-server was built without TLS.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import redis

from tests.support.redis_server import RedisServer, RedisServerError, free_port


def make_certificate(directory: Path) -> tuple[Path, Path]:
    """Write a self-signed certificate and its key for ``127.0.0.1``; return both paths."""
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("the openssl CLI is not installed")
    cert, key = directory / "redis.crt", directory / "redis.key"
    subprocess.run(
        [
            openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
            "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
            "-keyout", str(key), "-out", str(cert),
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )  # fmt: skip
    return cert, key


class TlsRedis:
    """A running server's TLS port and certificate: ``client()`` connects with TLS."""

    def __init__(self, server: RedisServer, tls_port: int, cert: Path) -> None:
        self.server = server
        self.tls_port = tls_port
        self.cert = cert

    @property
    def url(self) -> str:
        return f"rediss://127.0.0.1:{self.tls_port}/0?ssl_ca_certs={self.cert}"

    def client(self, **kwargs: Any) -> redis.Redis:
        return redis.Redis.from_url(self.url, **kwargs)


@contextmanager
def tls_redis() -> Iterator[TlsRedis]:
    """Start a redis-server with a TLS port beside its plain one; stop it afterwards."""
    server = RedisServer()
    cert, key = make_certificate(server.dir)
    tls_port = free_port()
    server.extra_args = (
        "--tls-port", str(tls_port),
        "--tls-cert-file", str(cert),
        "--tls-key-file", str(key),
        "--tls-ca-cert-file", str(cert),
        "--tls-auth-clients", "no",
    )  # fmt: skip
    try:
        server.start()
    except RedisServerError as exc:
        server.cleanup()
        if "tls" in str(exc).lower():
            pytest.skip(f"redis-server has no TLS: {exc}")
        raise
    try:
        yield TlsRedis(server, tls_port, cert)
    finally:
        server.stop()
        server.cleanup()
