"""``manage.py ledger_demo --no-serve``: an admin user and every state in every queue."""

from __future__ import annotations

import io
import re
from collections.abc import Iterator

import pytest
from django.contrib.auth import authenticate
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import override_settings

from django_ledger.conf import get_ledger, reset_connections
from tests.redis_server import RedisServer

pytestmark = pytest.mark.django_db


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


def test_seeds_every_state_in_every_queue(queues: None) -> None:
    out = demo()
    for queue in ("default", "emails"):
        line = re.search(rf"^queue {queue}: (.*)$", out, re.MULTILINE)
        assert line is not None, out
        counts = dict(pair.split("=") for pair in line.group(1).split())
        assert all(int(value) >= 1 for value in counts.values()), counts
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


def test_a_closed_gate_is_a_clear_error(queues: None) -> None:
    get_ledger("emails").close_gate()
    with pytest.raises(CommandError, match="gate closed"):
        demo()


def test_bad_port(queues: None) -> None:
    with pytest.raises(CommandError, match="--port"):
        call_command("ledger_demo", "--port", "0", "--no-serve", stdout=io.StringIO())


def test_prints_each_step_as_resolve_reads_it(queues: None) -> None:
    out = demo()
    expected = {
        "completed": "COMPLETED",
        "failed": "FAILED",
        "retried": "PENDING",
        "claimed": "CLAIMED",
        "dead": "DEAD",
        "later": "PENDING",
    }
    for step, state in expected.items():
        line = re.search(rf"^  {step} +(demo-\S+): (\w+), attempts (\d+), fence (\d+)", out, re.M)
        assert line is not None, out
        assert line.group(2) == state
        record = get_ledger("default").resolve(line.group(1)) or get_ledger("emails").resolve(
            line.group(1)
        )
        assert record is not None and record.state.value == state
