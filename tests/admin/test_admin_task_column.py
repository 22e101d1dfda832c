"""The task column: the records list and the queue page's expired leases name each
record's task, read with the row (no read per record); a raw record's cell stays blank."""

from __future__ import annotations

import html
import re

import pytest
import redis
from django.test import Client

from django_ledger.core.jobs import encode_task
from django_ledger.core.ledger import Ledger
from tests.support.ledger_helpers import count_calls
from tests.support.tasks_helpers import wait_until

pytestmark = pytest.mark.django_db

CHANGELIST = "/admin/django_ledger/record/"
HEALTH = "/admin/django_ledger/queue/default/change/"
CELL = re.compile(
    r'<th class="field-request_id"><a [^>]*>([^<]*)</a></th>.*?'
    # The function's name shows; its whole dotted path is the title (blank: no span).
    r'<td class="field-task_name">(?:<span title="([^"]*)">([^<]*)</span>)?</td>',
    re.S,
)


def task_cells(client: Client, params: dict[str, str] | None = None) -> dict[str, str]:
    response = client.get(CHANGELIST, params or {})
    assert response.status_code == 200
    found = {}
    for rid, task, shown in CELL.findall(response.content.decode()):
        path = html.unescape(task)
        assert html.unescape(shown) == path.rsplit(".", 1)[-1]
        found[rid] = path
    return found


def test_the_list_names_each_records_task_and_leaves_raw_records_blank(
    admin_client: Client, admin_ledger: Ledger
) -> None:
    big = encode_task("shop.tasks.send_receipt", ["x" * 100_000], {"to": "a@example.com"})
    admin_ledger.admit_many(
        [
            ("task", encode_task("shop.tasks.send_receipt", [1042], {})),
            ("big", big),  # the path is read from the payload's end, whatever its size
            ("raw", "plain bytes"),
            ("json", '{"task": "not.canonical", "v": 1}'),  # not as Django writes tasks
            ("quote", '{"args":[],"task":"a\\",\\"task\\":\\"b","v":1}'),  # an escaped path
            ("long", encode_task("a." + "b" * 400, [], {})),  # past the bytes read: blank
        ]
    )
    cells = task_cells(admin_client)
    assert cells == {
        "task": "shop.tasks.send_receipt",
        "big": "shop.tasks.send_receipt",
        "raw": "",
        "json": "",
        "quote": "",
        "long": "",
    }
    assert ">Task<" in admin_client.get(CHANGELIST).content.decode()


def test_the_column_costs_no_read_per_record(
    admin_client: Client, admin_ledger: Ledger, redis_client: redis.Redis
) -> None:
    admin_ledger.admit_many(
        [(f"r{i:03d}", encode_task("app.tasks.work", [i], {})) for i in range(100)]
    )
    admin_client.get(CHANGELIST)
    with count_calls(redis_client) as calls:
        cells = task_cells(admin_client)
    assert len(cells) == 100 and set(cells.values()) == {"app.tasks.work"}
    reads = calls.by_command.get("hget", 0) + calls.by_command.get("hmget", 0)
    assert reads <= 100, calls.by_command  # the page's own reads, one per row shown
    assert calls.by_command.get("hgetall", 0) == 0


def test_the_queue_pages_expired_leases_name_their_task(
    admin_client: Client, admin_ledger: Ledger
) -> None:
    admin_ledger.admit_many([("ran", encode_task("app.tasks.export", [], {})), ("plain", "x")])
    first = admin_ledger.claim("dead-worker", lease=0.001)
    second = admin_ledger.claim("dead-worker", lease=0.001)
    assert first is not None and second is not None
    wait_until(lambda: admin_ledger.stats().expired_leases == 2)
    text = admin_client.get(HEALTH).content.decode()
    table = re.search(r'<table id="expired">(.*?)</table>', text, re.S)
    assert table is not None
    assert ">Task<" in table.group(1)
    cells = re.findall(r'>([\w-]+)</a></td>\s*<td data-task="([^"]*)">', table.group(1))
    assert sorted(cells) == [("plain", ""), ("ran", "app.tasks.export")]
