"""Schedulers publish what they run; the admin's Schedules page lists it all.

A real ``ledger_scheduler`` runs with a settings module of its own, holding a schedule
the test process's settings lack; the page lists it, marked as not in this process's
settings, with the node that runs it, and drops it once that scheduler stops.
"""

from __future__ import annotations

import html
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from django.test import Client

from django_ledger.core.schedule import PUBLISH_TTL_MS, ScheduleStore, state_key
from django_ledger.core.schedule.running import running_index_key, running_key
from tests.support.redis_server import RedisServer, delete_namespace
from tests.support.worker_process import wait_until

ROOT = Path(__file__).resolve().parents[2]
LIST = "/admin/django_ledger/schedule/"
TASK = "tests.support.tasks_app.tasks.noop"


@pytest.fixture
def scheduler_process(
    redis_server: RedisServer, redis_client: redis.Redis, namespace: str, tmp_path: Path
) -> Iterator[subprocess.Popen[bytes]]:
    env = {
        **os.environ,
        "REDIS_URL": redis_server.url,
        "DJANGO_SETTINGS_MODULE": "tests.support.scheduler_published_settings",
        "LEDGER_NAMESPACE": namespace,
        "PYTHONPATH": str(ROOT),
    }
    log = (tmp_path / "scheduler.log").open("wb")
    process = subprocess.Popen(
        [sys.executable, str(ROOT / "manage.py"), "ledger_scheduler", "--interval", "0.2"],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    yield process
    if process.poll() is None:
        process.kill()
    process.wait()
    log.close()
    redis_client.delete(state_key(namespace))
    delete_namespace(redis_client, namespace)


def row(text: str, key: str) -> str | None:
    found = re.search(rf'data-schedule="{re.escape(key)}">(.*?)</tr>', text, re.S)
    return None if found is None else found.group(1)


def test_the_page_lists_a_schedule_only_another_scheduler_knows(
    admin_client: Client,
    settings: Any,
    namespace: str,
    redis_client: redis.Redis,
    scheduler_process: subprocess.Popen[bytes],
) -> None:
    settings.LEDGER = {
        **settings.LEDGER,
        "NAMESPACE": namespace,
        "SCHEDULES": {"here-only": {"TASK": TASK, "EVERY": 60}},
    }
    store = ScheduleStore(redis_client, namespace)
    wait_until(lambda: any(e.key == "only-there" for e in store.running()), 30, "the publication")
    # One key for the node, with a TTL its ticks refresh, and the index of nodes.
    ttl = redis_client.pttl(running_key(namespace, "published-node"))
    assert 0 < ttl <= PUBLISH_TTL_MS
    assert redis_client.zrange(running_index_key(namespace), 0, -1) == [b"published-node"]

    text = html.unescape(admin_client.get(LIST).content.decode())

    there = row(text, "only-there")
    assert there is not None, text
    assert "not in this process's settings" in there
    assert TASK in there and "published-node" in there
    assert "At 03:00 every day (Europe/Paris)" in there
    assert re.search(r"\d\d:\d\d:\d\d UTC", there)
    assert f'href="{LIST}only-there/change/"' not in there
    here = row(text, "here-only")
    assert here is not None
    assert "not in this process's settings" not in here and "no scheduler running" in here

    scheduler_process.send_signal(signal.SIGTERM)
    assert scheduler_process.wait(20) == 0
    text = html.unescape(admin_client.get(LIST).content.decode())
    assert row(text, "only-there") is None
    assert row(text, "here-only") is not None


def test_a_schedule_on_a_queue_these_settings_lack_is_for_superusers_only(
    client: Client,
    django_user_model: Any,
    settings: Any,
    namespace: str,
    redis_client: redis.Redis,
) -> None:
    from django.contrib.auth.models import Permission

    from django_ledger.core.schedule import Running

    settings.LEDGER = {**settings.LEDGER, "NAMESPACE": namespace, "SCHEDULES": {}}
    store = ScheduleStore(redis_client, namespace)
    now_ms = store.server_time_ms()
    elsewhere = Running("far", TASK, "elsewhere", None, 300, "UTC", None, True)
    store.publish("far-node", now_ms, [elsewhere], 10_000)
    user = django_user_model.objects.create(username="viewer", is_staff=True)
    user.user_permissions.add(Permission.objects.get(codename="view_schedule"))
    client.force_login(user)
    try:
        assert row(html.unescape(client.get(LIST).content.decode()), "far") is None
        user.is_superuser = True
        user.save()
        found = row(html.unescape(client.get(LIST).content.decode()), "far")
        assert found is not None and "Every 5 minutes" in found and "far-node" in found
    finally:
        store.unpublish("far-node")
