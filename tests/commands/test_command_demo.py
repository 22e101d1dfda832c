"""``manage.py ledger_demo --no-serve``: an admin user and every state in every queue.

Seeding happens once per queue and never touches a record the demo did not make.
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from django.contrib.auth import authenticate
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import override_settings

from django_ledger.conf import get_ledger, reset_connections
from django_ledger.core.errors import CorruptRecord
from django_ledger.core.ledger import Ledger
from django_ledger.core.records import decode_record
from testproject.demo import demo_ids
from tests.support.redis_server import RedisServer

pytestmark = pytest.mark.django_db

QUEUES = ("default", "emails")
EXPECTED = {
    "demo-completed": "COMPLETED",
    "demo-failed": "FAILED",
    "demo-retried": "PENDING",
    "demo-claimed": "CLAIMED",
    "demo-expired": "PENDING",
    "demo-dead": "DEAD",
    "demo-pending": "PENDING",
    "demo-later": "PENDING",
    "demo-quarantined": "QUARANTINED",
}


@pytest.fixture
def queues(redis_server: RedisServer, namespace: str) -> Iterator[None]:
    config = {
        "CONNECTION": redis_server.url,
        "NAMESPACE": namespace,
        "QUEUES": {"default": {}, "emails": {"MAX_ATTEMPTS": 3}},
    }
    # A fast hasher: the default one is slow by design, and the demo hashes every run.
    fast = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    with override_settings(LEDGER=config, PASSWORD_HASHERS=fast):
        yield
    reset_connections()


def demo() -> str:
    out = io.StringIO()
    call_command("ledger_demo", "--no-serve", stdout=out, stderr=io.StringIO())
    return out.getvalue()


def counts_of(out: str, queue: str) -> tuple[str, dict[str, int]]:
    line = re.search(rf"^queue {queue}: (seeded|seeded before, left as it is): (.*)$", out, re.M)
    assert line is not None, out
    return line.group(1), {k: int(v) for k, v in (p.split("=") for p in line.group(2).split())}


def snapshot(ledger: Ledger) -> dict[str, object]:
    """Every byte of the queue's keys: its records, its indexes with scores, its quarantine."""
    client = ledger.redis
    return {
        "records": client.hgetall(ledger.records_key),
        "quarantine": client.hgetall(ledger.quarantine_key),
        **{
            key: client.zrange(key, 0, -1, withscores=True)
            for key in (ledger.ready_key, ledger.leases_key, *ledger.terminal_keys.values())
        },
    }


def test_seeds_every_state_in_every_queue(queues: None) -> None:
    out = demo()
    for queue in QUEUES:
        done, counts = counts_of(out, queue)
        assert done == "seeded"
        assert all(value >= 1 for value in counts.values()), counts
        stats = get_ledger(queue).stats()
        assert stats.pending_due and stats.pending_later and stats.claimed
        assert stats.completed and stats.failed and stats.dead and stats.quarantined
        assert stats.expired_leases == 0 and not stats.gate_closed


def test_prints_a_working_admin_password_and_resets_it(queues: None) -> None:
    first = re.search(r"user admin, password (\S+)", demo())
    assert first is not None
    user = authenticate(username="admin", password=first.group(1))
    assert user is not None and user.is_superuser and user.is_staff
    second = re.search(r"user admin, password (\S+)", demo())
    assert second is not None and second.group(1) != first.group(1)
    assert authenticate(username="admin", password=first.group(1)) is None
    assert authenticate(username="admin", password=second.group(1)) is not None


def test_a_closed_gate_is_a_clear_error_and_nothing_is_written(queues: None) -> None:
    emails = get_ledger("emails")
    emails.close_gate()
    with pytest.raises(CommandError, match="gate closed"):
        demo()
    assert emails.stats().total == 0 and emails.stats().quarantined == 0


def test_bad_port(queues: None) -> None:
    with pytest.raises(CommandError, match="--port"):
        call_command("ledger_demo", "--port", "0", "--no-serve", stdout=io.StringIO())


def test_prints_each_record_as_resolve_reads_it(queues: None) -> None:
    out = demo()
    for queue in QUEUES:
        section = out.split(f"queue {queue}:", 1)[1].split("\nqueue ", 1)[0]
        lines = re.findall(r"^  (\S+): (\w+)(?:, attempts (\d+), fence (\d+))?", section, re.M)
        assert {request_id: state for request_id, state, _, _ in lines} == EXPECTED, section
        ledger = get_ledger(queue)
        for request_id, state, attempts, fence in lines:
            record = ledger.resolve(request_id) if state != "QUARANTINED" else None
            if state == "QUARANTINED":
                assert ledger.redis.hexists(ledger.quarantine_key, request_id)
                continue
            assert record is not None and record.state.value == state
            assert (record.attempts, record.fence) == (int(attempts), int(fence))


def test_never_touches_records_it_did_not_make(queues: None, redis_client: redis.Redis) -> None:
    # Records a user admitted by hand, due before anything the demo makes, one claimed.
    for queue in QUEUES:
        ledger = get_ledger(queue)
        ledger.admit("order-1041:receipt", '{"to": "bob@example.com"}')
        ledger.admit("order-1042:receipt", '{"to": "ada@example.com"}')
        ledger.admit("order-1040:invoice", '{"to": "eve@example.com"}', delay=120)
        assert ledger.claim("someone-else", lease=600) is not None
    before = {queue: snapshot(get_ledger(queue)) for queue in QUEUES}
    demo()
    for queue in QUEUES:
        after = snapshot(get_ledger(queue))
        for part, content in before[queue].items():
            mine = after[part]
            if isinstance(content, dict):
                assert isinstance(mine, dict)
                assert {key: mine.get(key) for key in content} == content, part
            else:
                assert isinstance(content, list) and isinstance(mine, list)
                assert set(content) <= set(mine), part

    # A re-run after another hand admission: nothing of anyone's moves, the demo's included.
    for queue in QUEUES:
        get_ledger(queue).admit("order-1043:receipt", '{"to": "ann@example.com"}')
    before = {queue: snapshot(get_ledger(queue)) for queue in QUEUES}
    out = demo()
    for queue in QUEUES:
        assert counts_of(out, queue)[0] == "seeded before, left as it is"
        assert snapshot(get_ledger(queue)) == before[queue]
        assert "order-" not in out


def test_seeds_once(queues: None) -> None:
    first = demo()
    before = {queue: snapshot(get_ledger(queue)) for queue in QUEUES}
    second = demo()
    for queue in QUEUES:
        assert counts_of(first, queue)[0] == "seeded"
        assert counts_of(second, queue)[0] == "seeded before, left as it is"
        assert snapshot(get_ledger(queue)) == before[queue]


def test_a_queue_holding_a_demo_id_is_left_alone(queues: None) -> None:
    emails = get_ledger("emails")
    emails.admit("demo-later", "mine, not the demo's")
    before = snapshot(emails)
    out = demo()
    assert counts_of(out, "emails")[0] == "seeded before, left as it is"
    assert snapshot(emails) == before
    assert counts_of(out, "default")[0] == "seeded"


@pytest.mark.standalone_only(reason="the demo runs on the standalone URL, the scan on the cluster")
def test_leaves_no_keys_but_the_queues(
    queues: None, namespace: str, redis_client: redis.Redis
) -> None:
    demo()
    configured = {key for queue in QUEUES for key in get_ledger(queue).keys}
    found = {key.decode() for key in redis_client.scan_iter(match=f"{{{namespace}:*")}
    assert found and found <= configured, found - configured


def test_the_corrupt_bytes_are_a_torn_record(queues: None) -> None:
    demo()
    ledger = get_ledger("default")
    raw = ledger.redis.hget(ledger.quarantine_key, "demo-quarantined")
    assert raw is not None and raw.startswith(b"1") and b'{"queue": "default"' in raw
    with pytest.raises(CorruptRecord, match="checksum"):
        decode_record("demo-quarantined", raw)
    assert set(demo_ids()) == set(EXPECTED)


def test_the_demo_prints_a_curl_line_whose_token_works(queues: None) -> None:
    from rest_framework.test import APIClient

    line = next(line for line in demo().splitlines() if line.startswith("api: curl"))
    key = line.split('"Authorization: Token ')[1].split('"')[0]
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    response = api.get("/api/queues/")
    assert response.status_code == 200, response.content


def test_the_dead_record_used_every_attempt_its_queue_allows(queues: None) -> None:
    # The admin shows "ended: out of attempts" beside "Attempts N of at most MAX_ATTEMPTS":
    # the seeded record must have had as many claims as its queue allows, no fewer.
    demo()
    for queue, allowed in (("default", 16), ("emails", 3)):
        ledger = get_ledger(queue)
        assert ledger.max_attempts == allowed
        record = ledger.resolve("demo-dead")
        assert record is not None and record.state.value == "DEAD"
        assert record.attempts == allowed


def test_a_password_file_keeps_the_admin_password_across_runs(queues: None, tmp_path: Path) -> None:
    kept = tmp_path / "demo" / "admin-password"

    def password_of_a_run() -> str:
        out = io.StringIO()
        call_command("ledger_demo", "--no-serve", "--password-file", str(kept), stdout=out)
        found = re.search(r"user admin, password (\S+)", out.getvalue())
        assert found is not None and f"in {kept}" in out.getvalue(), out.getvalue()
        return found.group(1)

    first = password_of_a_run()
    assert kept.read_text() == first + "\n" and kept.stat().st_mode & 0o077 == 0
    assert password_of_a_run() == first
    assert authenticate(username="admin", password=first) is not None
    # Deleting the file asks for a new one: the old one stops working.
    kept.unlink()
    second = password_of_a_run()
    assert second != first and kept.read_text() == second + "\n"
    assert authenticate(username="admin", password=first) is None
    assert authenticate(username="admin", password=second) is not None


def test_an_unusable_password_file_is_a_clear_error(queues: None, tmp_path: Path) -> None:
    with pytest.raises(CommandError, match="could not use --password-file"):
        call_command(
            "ledger_demo", "--no-serve", "--password-file", str(tmp_path), stdout=io.StringIO()
        )
