"""The Workers page of the admin: live heartbeats, what each worker runs, who may see it.

Heartbeats come from a real ``ledger_worker`` process (``tests.support.worker_process``) or are
written with ``Heartbeats`` directly, in the test's own namespace.
"""

from __future__ import annotations

import html
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from django.contrib.admin.utils import quote
from django.test import Client
from django.urls import reverse

from django_ledger.conf import reset_connections
from django_ledger.core.worker import Heartbeats, WorkerInfo
from tests.support.redis_server import RedisServer, free_port
from tests.support.worker_process import WorkerProcess, wait_until
from tests.support.worker_starts import starting

pytestmark = pytest.mark.django_db

LIST = "/admin/django_ledger/worker/"
WORKER_ROW = re.compile(r'<tr data-worker="([^"]*)">')


def detail(worker_id: str) -> str:
    return reverse("admin:django_ledger_worker_change", args=(quote(worker_id),))


def record_url(queue: str, request_id: str) -> str:
    return reverse("admin:django_ledger_record_change", args=(quote(f"{queue} {request_id}"),))


@pytest.fixture
def workers_ns(settings: Any, namespace: str) -> str:
    settings.LEDGER = {
        **settings.LEDGER,
        "NAMESPACE": namespace,
        "QUEUES": {"default": {}, "blocking": {}, "reports": {"GROUPS": ["ops"]}},
    }
    return namespace


@pytest.fixture
def beats(redis_client: redis.Redis, workers_ns: str) -> Heartbeats:
    return Heartbeats(redis_client, workers_ns)


@pytest.fixture
def start(redis_server: RedisServer, workers_ns: str, tmp_path: Path) -> Iterator[Any]:
    yield from starting(
        tmp_path, lambda args, log: WorkerProcess(redis_server.url, workers_ns, args, log)
    )


def info(worker_id: str, **kw: Any) -> WorkerInfo:
    now = int(time.time() * 1000)
    fields: dict[str, Any] = {
        "host": "web-1",
        "pid": 4242,
        "queues": ["default"],
        "concurrency": 8,
        "started_at": now - 60_000,
        "beat_at": now,
        **kw,
    }
    return WorkerInfo(worker_id=worker_id, **fields)


def listed(response: Any) -> list[str]:
    assert response.status_code == 200, response.status_code
    return [html.unescape(w) for w in WORKER_ROW.findall(response.content.decode())]


def text(response: Any) -> str:
    assert response.status_code == 200, response.status_code
    return html.unescape(response.content.decode())


# -- what the page shows ---------------------------------------------------------------


def test_a_heartbeat_shows_every_field_and_its_running_task(
    beats: Heartbeats, login_as: Callable[..., Client]
) -> None:
    now = int(time.time() * 1000)
    beats.beat(
        info(
            "web-1:4242:abc123",
            queues=["default", "blocking"],
            processed=1234,
            failed=5,
            retried=7,
            lost=1,
            running=[
                {
                    "id": "order-1042",
                    "queue": "default",
                    "name": "shop.tasks.send_receipt",
                    "attempt": 2,
                    "since": now - 3_000,
                }
            ],
        ),
        ttl_s=30,
    )
    client = login_as("view_worker", "view_record")
    response = client.get(LIST)
    assert listed(response) == ["web-1:4242:abc123"]
    page = text(response)
    for shown in ("web-1", "4242", "default, blocking", "running", "shop.tasks.send_receipt"):
        assert shown in page, shown
    assert 'data-count="processed">1,234<' in page
    assert 'data-count="failed">5<' in page
    assert 'data-count="retried">7<' in page
    assert 'data-count="lost">1<' in page
    assert f'<a href="{record_url("default", "order-1042")}">order-1042</a>' in page
    assert "attempt 2" in page and " ago" in page
    # The worker's own page: the same, field by field.
    page = text(client.get(detail("web-1:4242:abc123")))
    assert 'data-field="process-id">4242<' in page
    assert 'data-field="concurrency">8<' in page
    assert 'data-field="state">running<' in page
    assert '<tr data-running="order-1042">' in page


def test_a_real_worker_shows_while_it_runs_and_drops_off_when_it_stops(
    start: Any, redis_client: redis.Redis, workers_ns: str, login_as: Callable[..., Client]
) -> None:
    from django_ledger import Ledger

    Ledger(redis_client, workers_ns, "blocking").admit("job-7", "work")
    worker = start("blocking", "--worker-id", "w-admin", "--concurrency", "2", "--no-repair")
    client = login_as("view_worker", "view_record")
    wait_until(
        lambda: 'data-running="job-7"' in text(client.get(LIST)),
        what="the worker's heartbeat to show its running task",
    )
    page = text(client.get(LIST))
    assert listed(client.get(LIST)) == ["w-admin"]
    assert f">{worker.process.pid}<" in page
    assert "wait_for_release" in page and "attempt 1" in page
    assert f'<a href="{record_url("blocking", "job-7")}">job-7</a>' in page
    assert text(client.get(detail("w-admin"))).count('data-running="job-7"') == 1
    redis_client.set(f"{workers_ns}:release", 1)
    wait_until(
        lambda: 'data-count="processed">1<' in text(client.get(LIST)),
        what="the processed count to go up",
    )
    worker.signal(15)
    assert worker.wait() == 0, worker.output()
    assert listed(client.get(LIST)) == []
    assert client.get(detail("w-admin")).status_code == 302  # gone: back to the list


def test_a_worker_whose_heartbeat_expired_drops_off(
    beats: Heartbeats, redis_client: redis.Redis, login_as: Callable[..., Client]
) -> None:
    beats.beat(info("alive"), ttl_s=30)
    beats.beat(info("dead"), ttl_s=0.05)
    wait_until(lambda: not redis_client.exists(beats.key("dead")), what="the heartbeat to expire")
    client = login_as("view_worker")
    assert listed(client.get(LIST)) == ["alive"]
    assert client.get(detail("dead")).status_code == 302
    # Reading the page pruned it from the index too.
    assert redis_client.zscore(beats.index_key, "dead") is None


def test_an_idle_worker_says_so(beats: Heartbeats, login_as: Callable[..., Client]) -> None:
    beats.beat(info("quiet", state="stopping"), ttl_s=30)
    page = text(login_as("view_worker").get(LIST))
    assert "idle" in page and '<span class="ledger-bad">stopping</span>' in page


# -- who may see it -----------------------------------------------------------------------


def test_only_staff_with_view_worker_may_see_the_page(
    beats: Heartbeats, login_as: Callable[..., Client]
) -> None:
    beats.beat(info("w1"), ttl_s=30)
    for url in (LIST, detail("w1")):
        anonymous = Client().get(url)
        assert anonymous.status_code == 302 and anonymous["Location"].startswith("/admin/login/")
    refused = login_as("view_record", "view_queue")
    for url in (LIST, detail("w1"), detail("w1").replace("change/", "history/")):
        assert refused.get(url).status_code == 403, url
    assert "Workers" not in refused.get("/admin/").content.decode()
    viewer = login_as("view_worker")
    assert listed(viewer.get(LIST)) == ["w1"]
    assert viewer.get(detail("w1")).status_code == 200
    assert ">Workers</a>" in viewer.get("/admin/").content.decode()
    # Read-only: nothing to add, change or delete.
    assert viewer.get(LIST + "add/").status_code == 403
    assert viewer.post(detail("w1"), {}).status_code == 200  # the same read-only page
    assert viewer.get(detail("w1").replace("change/", "delete/")).status_code == 403


def test_the_record_link_needs_view_record(
    beats: Heartbeats, login_as: Callable[..., Client]
) -> None:
    running = [{"id": "r1", "queue": "default", "name": "t", "attempt": 1, "since": 1}]
    beats.beat(info("w1", running=running), ttl_s=30)
    page = text(login_as("view_worker").get(LIST))
    assert 'data-running="r1">r1 ·' in page and record_url("default", "r1") not in page


def test_workers_and_tasks_of_queues_out_of_reach_are_not_shown(
    beats: Heartbeats, login_as: Callable[..., Client]
) -> None:
    secret = {"id": "secret-order", "queue": "reports", "name": "t", "attempt": 1, "since": 1}
    public = {"id": "p1", "queue": "default", "name": "t", "attempt": 1, "since": 2}
    beats.beat(info("ops-only", queues=["reports"], running=[secret]), ttl_s=30)
    beats.beat(info("mixed", queues=["default", "reports"], running=[secret, public]), ttl_s=30)
    outsider = login_as("view_worker", "view_record")
    assert listed(outsider.get(LIST)) == ["mixed"]
    page = text(outsider.get(LIST))
    assert 'data-running="p1"' in page and "secret-order" not in page and 'data-hidden="1"' in page
    assert outsider.get(detail("ops-only")).status_code == 302
    member = login_as("view_worker", "view_record", groups=("ops",))
    assert sorted(listed(member.get(LIST))) == ["mixed", "ops-only"]
    assert 'data-running="secret-order"' in text(member.get(detail("mixed")))


def test_redis_unavailable_gets_a_503_page(
    admin_client: Client, settings: Any, workers_ns: str
) -> None:
    settings.LEDGER = {**settings.LEDGER, "CONNECTION": f"redis://127.0.0.1:{free_port()}/0"}
    reset_connections()
    try:
        for url in (LIST, detail("w1")):
            response = admin_client.get(url)
            assert response.status_code == 503, url
            assert "could not read Redis" in response.content.decode()
    finally:
        reset_connections()


def test_queue_names_out_of_reach_are_not_shown(
    settings: Any, beats: Heartbeats, login_as: Callable[..., Client]
) -> None:
    settings.LEDGER = {
        **settings.LEDGER,
        "QUEUES": {"default": {}, "payroll-secret": {"GROUPS": ["hr"]}},
    }
    beats.beat(info("w1", queues=["default", "payroll-secret"]), ttl_s=30)
    outsider = login_as("view_worker")
    for url in (LIST, detail("w1")):
        page = text(outsider.get(url))
        assert "default" in page and "payroll-secret" not in page
        assert "(and 1 you do not reach)" in page  # counted, never named
    member = login_as("view_worker", groups=("hr",))
    for url in (LIST, detail("w1")):
        page = text(member.get(url))
        assert "default, payroll-secret" in page and "you do not reach" not in page
