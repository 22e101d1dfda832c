"""Limits per task (KEY "task") and a key's limits of its own (KEY_LIMITS, set_key_limits).

Every ledger test runs on the fused path (the only one with flow limits). Time moves
with the test seam ``clock_skew_ms``, never with a sleep.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings

from django_ledger import Ledger, State
from django_ledger.checks import check_settings
from django_ledger.conf import get_ledger, ledger_settings, reset_connections
from django_ledger.core.limits import KeyLimits, Limits, Rate, key_of
from tests.support.redis_server import RedisServer

pytest_plugins = ["tests.support.ledger_fixtures"]


@pytest.fixture
def optimized() -> bool:
    """The fused path: flow limits run there only (a reference ledger refuses them)."""
    return True


EXPORT, MAIL = "shop.tasks.export", "shop.tasks.mail"


def payload(task: str, n: int = 0) -> str:
    return json.dumps({"args": [n], "kwargs": {}, "task": task, "v": 1})


def admit(ledger: Ledger, task: str, n: int) -> None:
    answers = ledger.admit_many((f"{task}-{i:05d}", payload(task, i)) for i in range(n))
    assert all(a.status.name == "ADMITTED" for a in answers)


def task_of(claim_payload: str) -> str:
    task: str = json.loads(claim_payload)["task"]
    return task


def tasks(claims: Any) -> list[str]:
    return sorted(task_of(c.payload) for c in claims)


def test_the_key_task_reads_the_payloads_task_path() -> None:
    assert key_of("task", payload(EXPORT)) == EXPORT
    assert key_of("task", json.dumps({"args": []})) == ""  # no task: the key ''


def test_key_task_gives_each_task_its_budget_and_its_turn(ledger: Ledger) -> None:
    ledger.set_limits(Limits(concurrency=2, key="task"))
    admit(ledger, EXPORT, 50)
    admit(ledger, MAIL, 3)
    claims = ledger.claim_many("w", 10)
    assert tasks(claims) == [EXPORT, EXPORT, MAIL, MAIL]  # two of each task at once
    # Fair share: the first claims alternate between the tasks.
    for claim in claims:
        ledger.settle(claim, State.COMPLETED)
    order = [task_of(c.payload) for c in ledger.claim_many("w", 2)]
    assert sorted(order) == [EXPORT, MAIL]


def test_a_tasks_concurrency_of_its_own_holds_while_others_proceed(ledger: Ledger) -> None:
    ledger.set_limits(Limits(concurrency=3, key="task"))
    assert ledger.set_key_limits(EXPORT, Limits(concurrency=1)) is True
    assert ledger.set_key_limits(EXPORT, Limits(concurrency=1)) is False  # the same again
    admit(ledger, EXPORT, 6)
    admit(ledger, MAIL, 6)
    held: list[Any] = list(ledger.claim_many("w", 20))
    assert tasks(held) == [EXPORT] + [MAIL] * 3
    done = 0
    # Settle one claim at a time: never more than one export claimed at once, and the
    # mails go on at their own pace.
    while held:
        claim = held.pop(0)
        ledger.settle(claim, State.COMPLETED)
        done += 1
        held += list(ledger.claim_many("w", 20))
        assert sum(task_of(c.payload) == EXPORT for c in held) <= 1
        assert sum(task_of(c.payload) == MAIL for c in held) <= 3
    assert done == 12
    records = ledger.resolve_many([f"{EXPORT}-{i:05d}" for i in range(6)])
    assert all(r is not None and r.attempts == 1 for r in records)  # no attempt spent waiting


def test_the_use_lists_the_keys_limits(ledger: Ledger) -> None:
    ledger.set_limits(Limits(concurrency=3, key="task"))
    ledger.set_key_limits(EXPORT, Limits(concurrency=1))
    ledger.set_key_limits(MAIL, Limits(rate=Rate(5, 1000, 2)), source="settings")
    admit(ledger, EXPORT, 3)
    ledger.claim_many("w", 20)
    use = ledger.limits()
    assert use.key_limits == (
        KeyLimits(EXPORT, Limits(concurrency=1), "operator"),
        KeyLimits(MAIL, Limits(Rate(5, 1000, 2)), "settings"),
    )
    assert use.limits_of(EXPORT) == Limits(None, 1, "task")
    assert use.limits_of(MAIL) == Limits(Rate(5, 1000, 2), 3, "task")
    assert use.limits_of("other") == Limits(None, 3, "task")
    (row,) = use.keys
    assert row.key == EXPORT and row.slots_taken == 1 and row.due == 2
    assert use.held == 2  # held by the key's own concurrency of 1, not the queue's 3


def test_a_rate_of_its_own_per_key(ledger: Ledger) -> None:
    ledger.set_limits(Limits(key="task"))
    ledger.set_key_limits(EXPORT, Limits(rate=Rate(2, 1000, 2)))
    admit(ledger, EXPORT, 10)
    admit(ledger, MAIL, 10)
    first = ledger.claim_many("w", 30)
    assert tasks(first) == [EXPORT] * 2 + [MAIL] * 10
    again = ledger.claim_many("w", 30)
    assert len(again) == 0 and again.due_in_ms is not None and 0 < again.due_in_ms <= 500
    ledger.clock_skew_ms += 1000
    assert tasks(ledger.claim_many("w", 30)) == [EXPORT] * 2


def test_an_override_removed_falls_back_to_the_queues_numbers(ledger: Ledger) -> None:
    ledger.set_limits(Limits(concurrency=3, key="task"))
    ledger.set_key_limits(EXPORT, Limits(concurrency=1))
    admit(ledger, EXPORT, 10)
    assert tasks(ledger.claim_many("w", 20)) == [EXPORT]
    assert ledger.set_key_limits(EXPORT, None) is True
    assert ledger.set_key_limits(EXPORT, None) is False  # nothing left to remove
    assert ledger.limits().key_limits == ()
    assert tasks(ledger.claim_many("w", 20)) == [EXPORT, EXPORT]  # 3 at once in all


def test_an_operators_key_limits_stay_over_the_settings(ledger: Ledger) -> None:
    ledger.set_limits(Limits(concurrency=3, key="task"))
    ledger.set_key_limits(EXPORT, Limits(concurrency=2))
    assert not ledger.set_key_limits(EXPORT, Limits(concurrency=1), source="settings", force=False)
    assert not ledger.set_key_limits(EXPORT, None, source="settings", force=False)
    assert ledger.limits().limits_of(EXPORT).concurrency == 2
    # The queue's limits changed keep the keys' own.
    ledger.set_limits(Limits(concurrency=5, key="task"))
    assert ledger.limits().limits_of(EXPORT).concurrency == 2


def test_bad_key_limits_are_refused(ledger: Ledger) -> None:
    with pytest.raises(ValueError, match="need a key"):
        ledger.set_key_limits("", Limits(concurrency=1))
    with pytest.raises(ValueError, match="cannot be a key"):
        ledger.set_key_limits("a\nb", Limits(concurrency=1))
    with pytest.raises(ValueError, match="no KEY"):
        ledger.set_key_limits(EXPORT, Limits(concurrency=1, key="task"))
    with pytest.raises(TypeError):
        ledger.set_key_limits(EXPORT, {"CONCURRENCY": 1})  # type: ignore[arg-type]


def config(url: str, namespace: str, **queue: Any) -> dict[str, Any]:
    return {"CONNECTION": url, "NAMESPACE": namespace, "QUEUES": {"default": {}, "api": queue}}


def test_settings_give_the_keys_limits() -> None:
    queue = {
        "KEY": "task",
        "CONCURRENCY": 4,
        "KEY_LIMITS": {EXPORT: {"CONCURRENCY": 2}, MAIL: {"RATE": {"LIMIT": 5}}},
    }
    with override_settings(LEDGER=config("redis://x", "n", **queue)):
        assert check_settings() == []
        assert ledger_settings.queue("api").key_limits == (
            (EXPORT, Limits(concurrency=2)),
            (MAIL, Limits(Rate(5, 1000, 5))),
        )


@pytest.mark.parametrize(
    "queue",
    [
        {"KEY_LIMITS": {EXPORT: {"CONCURRENCY": 2}}},  # no KEY
        {"KEY": "task", "KEY_LIMITS": [EXPORT]},
        {"KEY": "task", "KEY_LIMITS": {EXPORT: 2}},
        {"KEY": "task", "KEY_LIMITS": {EXPORT: {"CONCURRENCY": 0}}},
        {"KEY": "task", "KEY_LIMITS": {EXPORT: {"RATE": {"LIMIT": 5, "EVERY": 1}}}},
        {"KEY": "task", "KEY_LIMITS": {EXPORT: {"KEY": "args.0"}}},
        {"KEY": "task", "KEY_LIMITS": {EXPORT: {}}},
        {"KEY": "task", "KEY_LIMITS": {"": {"CONCURRENCY": 1}}},
        {"KEY": "task", "KEY_LIMITS": {"a\x00b": {"CONCURRENCY": 1}}},
    ],
)
def test_bad_key_limits_in_the_settings_are_e100(queue: dict[str, Any]) -> None:
    with override_settings(LEDGER=config("redis://x", "n", **queue)):
        messages = check_settings()
        assert [m.id for m in messages] == ["django_ledger.E100"]
        assert "KEY_LIMITS" in messages[0].hint
        with pytest.raises(ImproperlyConfigured, match="KEY_LIMITS"):
            ledger_settings.queue("api")


def test_get_ledger_writes_the_keys_limits_and_drops_those_no_longer_declared(
    redis_server: RedisServer, namespace: str
) -> None:
    declared = {EXPORT: {"CONCURRENCY": 1}, MAIL: {"CONCURRENCY": 2}}
    with override_settings(
        LEDGER=config(redis_server.url, namespace, KEY="task", CONCURRENCY=3, KEY_LIMITS=declared)
    ):
        reset_connections()
        try:
            ledger = get_ledger("api")
            assert [
                (k.key, k.limits.concurrency, k.source) for k in ledger.limits().key_limits
            ] == [
                (EXPORT, 1, "settings"),
                (MAIL, 2, "settings"),
            ]
            admit(ledger, EXPORT, 3)
            admit(ledger, MAIL, 3)
            assert tasks(ledger.claim_many("w", 10)) == [EXPORT, MAIL, MAIL]
            ledger.set_key_limits(MAIL, Limits(concurrency=3))  # an operator's change
        finally:
            reset_connections()
    with override_settings(LEDGER=config(redis_server.url, namespace, KEY="task", CONCURRENCY=3)):
        try:
            # A new process: the export's limit is no longer declared, the operator's stays.
            use = get_ledger("api").limits()
            assert [(k.key, k.limits.concurrency, k.source) for k in use.key_limits] == [
                (MAIL, 3, "operator"),
            ]
            assert use.limits_of(EXPORT) == Limits(None, 3, "task")
        finally:
            reset_connections()
