"""The demo: an admin user, and a queue with a record in every state."""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass, field

from ..core.ledger import Ledger
from ..core.records import State
from ..core.results import Claim

__all__ = ["DemoSeed", "ensure_admin", "seed_demo"]

WORKER = "demo-worker"


def ensure_admin(username: str = "admin") -> str:
    """Create the superuser ``username``, or reset its password; return the new password."""
    from django.contrib.auth import get_user_model

    password = secrets.token_urlsafe(12)
    user_model = get_user_model()
    user = user_model._default_manager.filter(**{user_model.USERNAME_FIELD: username}).first()
    if user is None:
        user_model._default_manager.db_manager().create_superuser(
            username, email="", password=password
        )
    else:
        user.is_active = user.is_staff = user.is_superuser = True
        user.set_password(password)
        user.save()
    return password


@dataclass
class DemoSeed:
    """What seeding did to one queue: step -> the request id it touched."""

    queue: str
    steps: dict[str, str] = field(default_factory=dict)


def seed_demo(ledger: Ledger, run: str | None = None) -> DemoSeed:
    """Admit, claim, renew, settle, expire and corrupt records so every state shows.

    Ids carry ``run`` (random by default), so seeding twice adds records rather
    than colliding. The steps claim whatever is due first: on a queue that already
    holds due records, those are the ones that move.
    """
    run = run or secrets.token_hex(3)
    seed = DemoSeed(ledger.queue)

    def admit(step: str, delay: float = 0) -> str:
        request_id = f"demo-{run}-{step}"
        payload = json.dumps({"queue": ledger.queue, "step": step, "to": f"{step}@example.com"})
        ledger.admit(request_id, payload, delay=delay)
        return request_id

    def claim(step: str, lease: float = 30, on: Ledger = ledger) -> Claim:
        admit(step)
        got = on.claim(WORKER, lease=lease)
        if got is None:  # the gate is closed: nothing can be claimed
            raise RuntimeError(f"queue {ledger.queue!r} has its gate closed; open it to seed")
        seed.steps[step] = got.request_id
        return got

    ledger.settle(claim("completed"), State.COMPLETED)
    ledger.settle(claim("failed"), State.FAILED)
    ledger.settle(claim("retried"), State.PENDING, delay=300)
    held = claim("claimed", lease=60)
    ledger.renew(held, lease=600)
    # A lease that ran out: repair gives it back (PENDING), or ends it DEAD once a
    # record has had max_attempts claims (a twin ledger with max_attempts=1 here).
    _expire(ledger, claim("expired", lease=1))
    strict = Ledger(ledger.redis, ledger.namespace, ledger.queue, max_attempts=1)
    _expire(strict, claim("dead", lease=1, on=strict))
    seed.steps["pending"] = admit("pending")
    seed.steps["later"] = admit("later", delay=3600)
    garbage = f"demo-{run}-quarantined"
    with ledger.translate_errors():
        ledger.redis.hset(ledger.records_key, garbage, b"not a record")
    ledger.repair_records([(garbage, b"not a record")])
    seed.steps["quarantined"] = garbage
    return seed


def _expire(ledger: Ledger, claim: Claim) -> None:
    """Repair ``claim``'s record as if its lease had run out (the server clock moved on)."""
    with ledger.translate_errors():
        raw = ledger.redis.hget(ledger.records_key, claim.request_id)
    ledger.clock_skew_ms = claim.lease_until - ledger.server_time_ms() + 1
    try:
        ledger.repair_records([(claim.request_id, raw)])
    finally:
        ledger.clock_skew_ms = 0
