"""The probes' server and verdicts (``core/probes.py``), without Redis or Django.

A probe that raises answers 503 with its class only (never its message: it may hold a
URL or a password); unknown paths and methods are refused; a refusal from Redis counts
as an answer, a connection error as an outage, and readiness says why it fails.
"""

from __future__ import annotations

import http.client
from collections.abc import Iterator

import pytest
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError

from django_ledger.core.errors import LedgerUnavailable
from django_ledger.core.probes import Contact, ProbeServer, Turns, Verdict, liveness


def secret_failure() -> Verdict:
    raise RuntimeError("redis://:hunter2@db.internal:6379/0 refused")


@pytest.fixture
def server() -> Iterator[ProbeServer]:
    probes = ProbeServer("127.0.0.1", 0, secret_failure, lambda: Verdict(False, "draining"))
    yield probes
    probes.close()


def ask(server: ProbeServer, method: str, path: str) -> tuple[int, bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
    try:
        connection.request(method, path)
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def test_a_failing_probe_names_its_class_only_and_other_paths_and_methods_are_refused(
    server: ProbeServer,
) -> None:
    assert ask(server, "GET", "/healthz") == (503, b"probe failed: RuntimeError\n")
    assert ask(server, "GET", "/readyz?verbose=1") == (503, b"draining\n")
    assert ask(server, "HEAD", "/readyz") == (503, b"")
    assert ask(server, "GET", "/metrics")[0] == 404  # none given: nothing to scrape
    assert ask(server, "GET", "/" + "x" * 10_000)[0] == 404
    assert ask(server, "POST", "/healthz")[0] == 501
    assert ask(server, "GET", "/healthz")[0] == 503  # still serving after all that


def test_contact_counts_a_refusal_as_an_answer_and_a_lost_connection_as_an_outage() -> None:
    contact = Contact()
    assert contact.readiness(5, False, None) == Verdict(False, "starting")
    contact.after(ResponseError("OOM command not allowed"))
    assert contact.readiness(5, False, None) == Verdict(True)
    contact.after(LedgerUnavailable("gone"))
    contact.after(RedisConnectionError("gone"))
    assert 0 <= contact.outage() < 5 and contact.readiness(5, False, None).ok
    verdict = contact.readiness(0, False, None)  # any time at all since the first failure
    assert not verdict.ok and verdict.reason.startswith("redis unreachable for ")
    contact.answered()
    assert contact.outage() == 0 and contact.readiness(0, False, None).ok
    assert contact.readiness(5, True, None) == Verdict(False, "stopping")
    assert contact.readiness(5, False, "100 tasks started") == Verdict(False, "draining")


def test_liveness_fails_past_its_bound() -> None:
    turns = Turns()
    assert liveness(turns.age(), 1).ok
    assert liveness(12.4, 10) == Verdict(False, "loop stalled for 12 s")
