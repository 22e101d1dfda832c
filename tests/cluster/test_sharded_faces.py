"""A sharded queue (``SHARDS: 3``) seen through every face: one queue, whatever shard holds an id.

The admin's records list, record page, quarantine and task filter, operator actions,
``ledger_repair``, ``ledger_export`` / ``ledger_import``, the demo and the task backend
each see every shard's records (the API's listings and reads:
``test_sharded_faces_api.py``). In cluster mode the shards live on different masters.
"""

from __future__ import annotations

import copy
import html
import io
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from django.conf import settings
from django.contrib.admin.utils import quote
from django.contrib.messages import get_messages
from django.core.management import call_command
from django.test import Client, override_settings
from django.urls import reverse

from django_ledger import State
from django_ledger.conf import get_ledger
from django_ledger.core.ledger import Ledger
from django_ledger.core.sharded import ShardedLedger
from django_ledger.tasks import enqueue_once
from django_ledger.tasks.compat import TaskResultStatus
from testproject.demo import STEPS, read_demo, seed_demo
from tests.support.admin_fixtures import admin_user  # noqa: F401 - the fixture
from tests.support.ledger_helpers import GARBAGE
from tests.support.tasks_helpers import run_until_settled

pytestmark = pytest.mark.django_db

SHARDS = 3
CHANGELIST = "/admin/django_ledger/record/"
QUARANTINE_LIST = "/admin/django_ledger/quarantinedrecord/"
ROW = re.compile(r'<th class="field-request_id"><a href="[^"]*">([^<]*)</a></th>')
TOTAL = re.compile(r"(\d+) (?:records|record|quarantined records|quarantined record)\s*$", re.M)
ITEM = re.compile(r'name="item" value="([^"]*)"')
NEXT = re.compile(r'name="next" value="([^"]*)"')


def sharded_settings(namespace: str) -> dict[str, Any]:
    """The test project's ``LEDGER`` in ``namespace``, ``default`` and ``emails`` sharded."""
    ledger = copy.deepcopy(settings.LEDGER)
    ledger["NAMESPACE"] = namespace
    ledger["DISPATCH"] = {"NAMESPACE": namespace}
    ledger["QUEUES"]["default"] = {"SHARDS": SHARDS}
    ledger["QUEUES"]["emails"] = {"SHARDS": SHARDS}
    return ledger


@pytest.fixture
def sharded(namespace: str) -> Iterator[Ledger]:
    """The ``default`` queue of the test's namespace, in three shards."""
    with override_settings(LEDGER=sharded_settings(namespace)):
        ledger = get_ledger("default")
        assert isinstance(ledger, ShardedLedger) and len(ledger.shards) == SHARDS
        yield ledger


def shard_of(ledger: Ledger, request_id: str) -> int:
    return ledger.shards.index(ledger.shard_for(request_id))


def ids_in(ledger: Ledger, shard: int, count: int, prefix: str) -> list[str]:
    """``count`` ids (``prefix`` and a number) that live in shard ``shard``."""
    found: list[str] = []
    number = 0
    while len(found) < count:
        request_id = f"{prefix}{number}"
        if shard_of(ledger, request_id) == shard:
            found.append(request_id)
        number += 1
    return found


def spread(ledger: Ledger, ids: list[str]) -> None:
    """Check that ``ids`` lie in every shard (what the test means to cover)."""
    assert {shard_of(ledger, request_id) for request_id in ids} == set(range(SHARDS))


def listed(response: Any) -> list[str]:
    assert response.status_code == 200, response.status_code
    return [html.unescape(name) for name in ROW.findall(response.content.decode())]


def total_shown(response: Any) -> int:
    text = re.sub(r"<[^>]+>", "\n", response.content.decode())
    match = TOTAL.search(text)
    assert match, "no result count on the page"
    return int(match.group(1))


def messages_of(response: Any) -> list[str]:
    return [str(message) for message in get_messages(response.wsgi_request)]


def detail_url(request_id: str, queue: str = "default", model: str = "record") -> str:
    return reverse(f"admin:django_ledger_{model}_change", args=(quote(f"{queue} {request_id}"),))


def act(client: Client, request_id: str, name: str, model: str = "record") -> Any:
    """Press ``name`` on the id's page, confirm, and return the response after the redirects."""
    page = client.get(detail_url(request_id, model=model)).content.decode()
    match = re.search(rf'href="([^"]*)" data-action="{name}"', page)
    assert match, f"no {name} button on the page of {request_id}"
    confirmation = client.get(html.unescape(match.group(1))).content.decode()
    form = {
        "item": [html.unescape(item) for item in ITEM.findall(confirmation)],
        "next": html.unescape(NEXT.search(confirmation).group(1)),  # type: ignore[union-attr]
    }
    assert len(form["item"]) == 1
    return client.post(reverse(f"admin:django_ledger_{model}_act", args=(name,)), form, follow=True)


def quarantine(ledger: Ledger, client: redis.Redis, request_id: str) -> None:
    """Store corrupt bytes under ``request_id`` (in its shard) and let repair set them aside."""
    shard = ledger.shard_for(request_id)
    client.hset(shard.records_key, request_id, GARBAGE)
    assert shard.repair_records([(request_id, GARBAGE)]).quarantined == 1


def test_in_cluster_mode_the_shards_live_on_different_masters(
    sharded: Ledger, redis_client: redis.Redis
) -> None:
    if not isinstance(redis_client, redis.RedisCluster):
        pytest.skip("one server: every shard is on it")
    masters = {redis_client.get_node_from_key(s.records_key).name for s in sharded.shards}
    assert len(masters) == SHARDS


# -- the admin ------------------------------------------------------------------------


def test_the_records_list_pages_every_shard_in_due_order(
    admin_client: Client, sharded: Ledger
) -> None:
    ids = [f"r{i:03d}" for i in range(250)]
    spread(sharded, ids)
    for i, request_id in enumerate(ids):
        sharded.admit(request_id, "x", delay=i)
    first = admin_client.get(CHANGELIST)
    assert listed(first) == ids[:100]
    assert total_shown(first) == 250
    assert listed(admin_client.get(CHANGELIST, {"p": 2})) == ids[100:200]
    assert listed(admin_client.get(CHANGELIST, {"p": 3})) == ids[200:]
    # Sorted by due time, newest first: the shards merged from the top of their indexes.
    assert listed(admin_client.get(CHANGELIST, {"o": "-4"})) == ids[::-1][:100]
    assert listed(admin_client.get(CHANGELIST, {"o": "-4", "p": 3})) == ids[::-1][200:]


def test_deep_pages_of_a_sharded_queue_start_at_the_right_row(
    admin_client: Client, sharded: Ledger
) -> None:
    # Past the first thousand rows of a state, a page finds its first row's score by a
    # search; records share due times (one per batch and shard), so ties are crossed.
    ids = [f"d{i:04d}" for i in range(1250)]
    for batch in range(25):
        chunk = ids[batch * 50 : (batch + 1) * 50]
        for shard in sharded.shards:
            group = [(i, "x") for i in chunk if sharded.shard_for(i) is shard]
            shard.admit_many(group, delay=batch)
    due = {r.request_id: r.due_at for r in sharded.resolve_many(ids) if r is not None}
    order = sorted(ids, key=lambda i: (due[i], i))
    assert listed(admin_client.get(CHANGELIST, {"p": 11})) == order[1000:1100]
    assert listed(admin_client.get(CHANGELIST, {"p": 13})) == order[1200:]
    newest = order[::-1]
    assert listed(admin_client.get(CHANGELIST, {"o": "-4", "p": 12})) == newest[1100:1200]
    assert listed(admin_client.get(CHANGELIST, {"o": "-4", "p": 13})) == newest[1200:]


def test_records_sharing_a_due_time_list_in_id_order_across_shards(
    admin_client: Client, sharded: Ledger
) -> None:
    ids = [f"s{i:02d}" for i in range(30)]
    spread(sharded, ids)
    for shard in sharded.shards:  # one script call per shard: one due time each
        shard.admit_many([(i, "x") for i in ids if sharded.shard_for(i) is shard])
    shown = listed(admin_client.get(CHANGELIST))
    assert sorted(shown) == ids and len(shown) == 30
    # Within one due time, the order is the id's, as one sorted set orders its members.
    due = {i: record.due_at for i, record in zip(ids, sharded.resolve_many(ids), strict=True)}
    assert shown == sorted(ids, key=lambda i: (due[i], i))


def test_the_state_filter_and_counts_cover_every_shard(
    admin_client: Client, sharded: Ledger
) -> None:
    done = [ids_in(sharded, shard, 2, "done-")[shard % 2] for shard in range(SHARDS)]
    held = [ids_in(sharded, shard, 1, "held-")[0] for shard in range(SHARDS)]
    waiting = [ids_in(sharded, shard, 2, "wait-")[1] for shard in range(SHARDS)]
    sharded.admit_many([(i, "x") for i in done])
    for claim in sharded.claim_many("w", 10, lease=600):
        sharded.settle(claim, State.COMPLETED)
    sharded.admit_many([(i, "x") for i in held])
    assert len(sharded.claim_many("w", 10, lease=600)) == SHARDS
    sharded.admit_many([(i, "x") for i in waiting], delay=3600)

    completed = admin_client.get(CHANGELIST, {"state": "COMPLETED"})
    assert sorted(listed(completed)) == sorted(done) and total_shown(completed) == SHARDS
    assert sorted(listed(admin_client.get(CHANGELIST, {"state": "CLAIMED"}))) == sorted(held)
    assert sorted(listed(admin_client.get(CHANGELIST, {"state": "PENDING"}))) == sorted(waiting)
    everything = admin_client.get(CHANGELIST)
    assert total_shown(everything) == 3 * SHARDS
    # Grouped by state as ever: pending, claimed, then completed.
    assert [set(listed(everything)[i : i + 3]) for i in (0, 3, 6)] == [
        set(waiting),
        set(held),
        set(done),
    ]
    # A search by id finds it in its shard.
    assert listed(admin_client.get(CHANGELIST, {"q": held[2]})) == [held[2]]


def test_the_record_page_of_an_id_in_another_shard(admin_client: Client, sharded: Ledger) -> None:
    (request_id,) = ids_in(sharded, 2, 1, "page-")
    sharded.admit(request_id, "the payload")
    response = admin_client.get(detail_url(request_id))
    assert response.status_code == 200
    text = html.unescape(response.content.decode())
    assert f"Record {request_id}" in text
    assert "the payload" in text and "PENDING" in text
    assert admin_client.get(detail_url("not-there")).status_code in (302, 404)


def test_the_quarantine_lists_every_shard(
    admin_client: Client, sharded: Ledger, redis_client: redis.Redis
) -> None:
    bad = [ids_in(sharded, 2, 2, "bad-")[0], ids_in(sharded, 1, 1, "bad-")[0]]
    for request_id in bad:
        quarantine(sharded, redis_client, request_id)
    page = admin_client.get(QUARANTINE_LIST)
    assert sorted(listed(page)) == sorted(bad) and total_shown(page) == 2
    assert listed(admin_client.get(QUARANTINE_LIST, {"q": bad[0]})) == [bad[0]]
    detail = admin_client.get(detail_url(bad[0], model="quarantinedrecord"))
    assert detail.status_code == 200
    assert f"Quarantined record {bad[0]}" in html.unescape(detail.content.decode())
    # Discard, from the quarantine, the id that lives in shard 2.
    response = act(admin_client, bad[0], "discard", model="quarantinedrecord")
    assert "Discarded: 1 record." in messages_of(response)
    assert listed(admin_client.get(QUARANTINE_LIST)) == [bad[1]]
    assert sharded.stats().quarantined == 1
    assert sharded.admit(bad[0], "again").status.value == "ADMITTED"


def test_the_task_filter_finds_tasks_in_every_shard(admin_client: Client, sharded: Ledger) -> None:
    from tests.support.tasks_app import tasks

    adds = [ids_in(sharded, shard, 1, "add-")[0] for shard in range(SHARDS)]
    for n, request_id in enumerate(adds):
        enqueue_once(tasks.add, request_id, n, n)
    (echo,) = ids_in(sharded, 1, 1, "echo-")
    enqueue_once(tasks.echo, echo, "a")
    response = admin_client.get(CHANGELIST, {"task": "tests.support.tasks_app.tasks.add"})
    assert sorted(listed(response)) == sorted(adds)
    assert echo in listed(admin_client.get(CHANGELIST))


# -- operator actions -----------------------------------------------------------------


def test_retry_fail_and_purge_act_on_ids_outside_shard_zero(
    admin_client: Client, sharded: Ledger
) -> None:
    (later,) = ids_in(sharded, 1, 1, "later-")
    (running,) = ids_in(sharded, 2, 1, "run-")
    (done,) = ids_in(sharded, 2, 2, "done-")[1:]
    sharded.admit(later, "x", delay=3600)
    response = act(admin_client, later, "retry")
    assert "Retried now: 1 record." in messages_of(response)
    record = sharded.resolve(later)
    assert record is not None and record.state is State.PENDING
    assert record.due_at <= sharded.shard_for(later).server_time_ms()

    sharded.admit(running, "x")
    sharded.admit(done, "x")
    claims = {c.request_id: c for c in sharded.claim_many("w", 10, lease=600)}
    assert {running, done, later} <= set(claims)
    sharded.settle(claims[done], State.COMPLETED)
    response = act(admin_client, running, "fail")
    assert any(message.endswith("1 record.") for message in messages_of(response))
    failed = sharded.resolve(running)
    assert failed is not None and failed.state is State.FAILED

    response = act(admin_client, done, "purge")
    assert "Purged: 1 record." in messages_of(response)
    assert sharded.resolve(done) is None
    assert sharded.admit(done, "again").status.value == "ADMITTED"


# -- commands -------------------------------------------------------------------------


def test_ledger_repair_mends_every_shard(sharded: Ledger, redis_client: redis.Redis) -> None:
    ids = [f"d{n}" for n in range(12)]
    spread(sharded, ids)
    sharded.admit_many([(i, "x") for i in ids])
    lost = [ids_in(sharded, shard, 1, "d")[0] for shard in (1, 2)]
    for request_id in lost:  # an index entry lost in shards 1 and 2
        redis_client.zrem(sharded.shard_for(request_id).ready_key, request_id)
    (garbage,) = ids_in(sharded, 2, 1, "garbage-")
    redis_client.hset(sharded.shard_for(garbage).records_key, garbage, GARBAGE)
    out, err = io.StringIO(), io.StringIO()
    call_command("ledger_repair", "default", stdout=out, stderr=err)
    assert err.getvalue() == ""
    line = next(line for line in out.getvalue().splitlines() if "queue default:" in line)
    figures = dict(pair.split("=") for pair in line.split(": ", 1)[1].split()[:7])
    assert int(figures["scanned"]) == 13
    assert int(figures["reindexed"]) == 2
    assert int(figures["quarantined"]) == 1
    stats = sharded.stats()
    assert stats.pending == 12 and stats.quarantined == 1
    assert {c.request_id for c in sharded.claim_many("w", 20)} == set(ids)


def test_export_then_import_into_an_empty_queue_round_trips(
    sharded: Ledger, tmp_path: Path
) -> None:
    ids = [f"x{n:02d}" for n in range(20)]
    spread(sharded, ids)
    sharded.admit_many([(i, f"payload {i}") for i in ids[:15]])
    sharded.admit_many([(i, f"payload {i}") for i in ids[15:]], delay=3600)
    claims = sharded.claim_many("w", 5, lease=600)
    sharded.settle(claims[0], State.COMPLETED)
    sharded.settle(claims[1], State.FAILED)
    before = {r.request_id: r for r in sharded.resolve_many(ids) if r is not None}
    assert len(before) == 20

    dump = tmp_path / "default.jsonl"
    out = io.StringIO()
    call_command("ledger_export", "--queue", "default", "-o", str(dump), stdout=out, stderr=out)
    lines = [json.loads(line) for line in dump.read_text().splitlines()]
    assert sorted(line["request_id"] for line in lines) == ids

    call_command("ledger_import", str(dump), "--queue", "emails", stdout=out, stderr=out)
    target = get_ledger("emails")
    assert isinstance(target, ShardedLedger)
    after = {r.request_id: r for r in target.resolve_many(ids) if r is not None}
    assert after == before
    # Each id is in its own shard of the target queue, where a duplicate is recognised.
    for request_id in ids:
        raw = target.shard_for(request_id).redis.hget(
            target.shard_for(request_id).records_key, request_id
        )
        assert raw is not None
    assert target.admit(ids[0], "again").status.value == "CONFLICT"
    assert target.stats().total == 20 and not target.gate_closed


# -- the demo and the task backend ----------------------------------------------------


def test_the_demo_seeds_a_sharded_queue(sharded: Ledger) -> None:
    seeded = seed_demo(sharded)
    assert seeded.seeded
    states = {record.request_id: record.state for record in read_demo(sharded)}
    assert len(states) == len(STEPS)
    assert states["demo-completed"] == "COMPLETED" and states["demo-dead"] == "DEAD"
    assert states["demo-quarantined"] == "QUARANTINED"
    assert not seed_demo(sharded).seeded  # once only


def test_a_task_on_a_sharded_queue_reads_its_result(sharded: Ledger) -> None:
    from tests.support.tasks_app import tasks

    results = [enqueue_once(tasks.add, ids_in(sharded, s, 1, "sum-")[0], s, 10) for s in range(3)]
    run_until_settled("default")
    for shard, result in enumerate(results):
        found = tasks.add.get_result(result.id)
        assert found.status == TaskResultStatus.SUCCESSFUL
        assert found.return_value == shard + 10
        assert shard_of(sharded, result.id) == shard
