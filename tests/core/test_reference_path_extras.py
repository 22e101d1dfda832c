"""The reference path keeps to the contract: each job-system extra is refused, in one sentence.

A ledger built with ``optimized=False`` answers the contract's operations (the
differential tests hold it to the fused path's answers) and refuses workflows and flow
limits with ``FusedPathOnly``; the system check E102 says so for a queue whose settings
ask for both.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import redis
from django.core.checks import Error
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings

from django_ledger import FusedPathOnly, LedgerError
from django_ledger.checks import check_settings
from django_ledger.conf import ledger_settings
from django_ledger.core.flows import FlowStep, admit_workflow, check_workflow, read_workflow
from django_ledger.core.ledger import Ledger
from django_ledger.core.limits import Limits, Rate
from django_ledger.core.unique import UniqueMode, admit_unique

SENTENCE = (
    r"run on the fused path only, and this ledger is on the reference path "
    r"\(optimized=False\): build it with optimized=True"
)

EXTRAS: list[tuple[str, str, Callable[[Ledger], Any]]] = [
    ("flow limits", "set_limits", lambda ledger: ledger.set_limits(Limits(concurrency=2))),
    (
        "a key's flow limits",
        "set_key_limits",
        lambda ledger: ledger.set_key_limits("tenant-1", Limits(concurrency=1)),
    ),
    (
        "workflows",
        "admit_workflow",
        lambda ledger: admit_workflow(ledger, "order-1", [FlowStep("a", "{}")]),
    ),
    ("cancel", "cancel", lambda ledger: ledger.cancel("order-1", by="alice")),
    (
        "unique admission",
        "admit_unique",
        lambda ledger: admit_unique(ledger, "r-1", "{}", mode=UniqueMode.START, digest="c"),
    ),
    (
        "workflows",
        "check_workflow",
        lambda ledger: check_workflow(ledger, "order-1", [FlowStep("a", "{}")]),
    ),
]


@pytest.mark.parametrize(("feature", "name", "call"), EXTRAS, ids=[e[1] for e in EXTRAS])
def test_each_extra_on_the_reference_path_is_refused_in_one_sentence(
    redis_client: redis.Redis,
    namespace: str,
    feature: str,
    name: str,
    call: Callable[[Ledger], Any],
) -> None:
    ledger = Ledger(redis_client, namespace, "q", optimized=False)
    with pytest.raises(FusedPathOnly, match=f"^{feature} {SENTENCE}") as raised:
        call(ledger)
    assert isinstance(raised.value, LedgerError)
    assert raised.value.feature == feature
    assert str(raised.value).count(":") == 1  # one sentence: what, then what to do
    # Nothing was written: no limits, no workflow, no record.
    assert redis_client.keys(f"{{{namespace}:q}}*") == []
    assert read_workflow(Ledger(redis_client, namespace, "q"), "order-1") is None


@pytest.mark.parametrize(("feature", "name", "call"), EXTRAS, ids=[e[1] for e in EXTRAS])
def test_each_extra_works_on_the_fused_path(
    redis_client: redis.Redis,
    namespace: str,
    feature: str,
    name: str,
    call: Callable[[Ledger], Any],
) -> None:
    ledger = Ledger(redis_client, namespace, "q")
    if name == "set_key_limits":
        ledger.set_limits(Limits(key="kwargs.tenant"))
    call(ledger)  # no refusal


def test_a_reference_claim_refuses_a_queue_whose_limits_a_fused_ledger_stored(
    redis_client: redis.Redis, namespace: str
) -> None:
    """Claiming past the limits would overrun them: the claim is refused instead."""
    fused = Ledger(redis_client, namespace, "q")
    reference = Ledger(redis_client, namespace, "q", optimized=False)
    assert fused.admit("a", "{}").status.name == "ADMITTED"
    assert reference.claim("w") is not None  # no limits yet: the contract's claim
    fused.admit("b", "{}")
    fused.set_limits(Limits(rate=Rate(10, 1000, 10), concurrency=1))
    match = f"^claims of a queue with flow limits {SENTENCE}"
    with pytest.raises(FusedPathOnly, match=match):
        reference.claim("w")
    with pytest.raises(FusedPathOnly, match=match):
        reference.claim_many("w", 5)
    with pytest.raises(FusedPathOnly, match=match):
        reference.settle_and_claim([], "w", 5)
    assert reference.resolve("b").state.name == "PENDING"  # nothing was claimed


def _checked(queue: dict[str, Any], **top: Any) -> list[Any]:
    config = {
        "CONNECTION": "redis://127.0.0.1:1/0",
        "DISPATCH": {"BACKEND": "django_ledger.core.dispatch.MemoryDispatchRegistry"},
        "QUEUES": {"default": {}, "tenants": queue},
        **top,
    }
    with override_settings(LEDGER=config):
        return check_settings()


@pytest.mark.parametrize(
    ("queue", "top", "named"),
    [
        ({"OPTIMIZED": False, "CONCURRENCY": 3}, {}, "CONCURRENCY"),
        ({"OPTIMIZED": False, "RATE": {"LIMIT": 5}}, {}, "RATE"),
        ({"OPTIMIZED": False, "KEY": "kwargs.tenant"}, {}, "KEY"),
        (
            {"OPTIMIZED": False, "KEY": "task", "KEY_LIMITS": {"app.t": {"CONCURRENCY": 1}}},
            {},
            "KEY, KEY_LIMITS",
        ),
        ({"CONCURRENCY": 3}, {"DEFAULTS": {"OPTIMIZED": False}}, "CONCURRENCY"),
    ],
    ids=["concurrency", "rate", "key", "key-limits", "from-defaults"],
)
def test_the_check_reports_limits_on_a_reference_queue(
    queue: dict[str, Any], top: dict[str, Any], named: str
) -> None:
    messages = _checked(queue, **top)
    assert [m.id for m in messages] == ["django_ledger.E102"], messages
    error = messages[0]
    assert isinstance(error, Error)
    assert error.msg.startswith(f"{named} on a queue with OPTIMIZED False")
    assert "fused path only" in error.msg
    assert "OPTIMIZED" in error.hint
    assert error.obj == "LEDGER['QUEUES']['tenants']"
    refused = pytest.raises(ImproperlyConfigured, match="fused path only")
    with override_settings(LEDGER={"QUEUES": {"tenants": queue}, **top}), refused:
        ledger_settings.queue("tenants")


@pytest.mark.parametrize(
    ("queue", "top"),
    [
        ({"CONCURRENCY": 3}, {}),
        ({"OPTIMIZED": True, "CONCURRENCY": 3}, {"DEFAULTS": {"OPTIMIZED": False}}),
        ({"OPTIMIZED": False}, {}),
        ({"OPTIMIZED": False, "CONCURRENCY": None}, {}),
    ],
    ids=["fused", "fused-over-defaults", "reference-no-limits", "reference-limit-none"],
)
def test_the_check_passes_limits_on_the_fused_path_and_a_bare_reference_queue(
    queue: dict[str, Any], top: dict[str, Any]
) -> None:
    assert _checked(queue, **top) == []
