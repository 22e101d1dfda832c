"""What each engine of the dispatch registry does beyond the contract they share.

On Redis: its keys and TTLs in the reference format, records the reference wrote, bad
namespaces, Redis down, and processes racing for one claim. In memory: records expire
by the injected clock, and expired ones are swept. And the module: it imports no Django,
and exports what it names. The contract both engines keep is ``test_dispatch.py``'s.
"""

from __future__ import annotations

import ast
import json
import os
import socket
import subprocess
import sys
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from django_ledger.core import dispatch
from django_ledger.core.dispatch import (
    CorruptDispatch,
    Dispatch,
    DispatchUnavailable,
    MemoryDispatchRegistry,
    RedisDispatchRegistry,
)
from django_ledger.core.errors import LedgerUnavailable
from tests.core.test_dispatch import FIRE, FIRE_EPOCH, ROOT, WEEK, FakeClock, wait_until

# -- Redis only ----------------------------------------------------------------


@pytest.fixture
def redis_registry(redis_client: redis.Redis, namespace: str) -> RedisDispatchRegistry:
    return RedisDispatchRegistry(redis_client, namespace=namespace)


def test_default_ttl_is_a_week(redis_client: redis.Redis) -> None:
    assert RedisDispatchRegistry.DEFAULT_TTL == WEEK
    assert RedisDispatchRegistry(redis_client).ttl == WEEK
    assert RedisDispatchRegistry(redis_client).namespace == "kaal"
    assert MemoryDispatchRegistry().ttl == WEEK


def test_redis_keys_have_the_reference_format(
    redis_registry: RedisDispatchRegistry, redis_client: redis.Redis, namespace: str
) -> None:
    assert (
        redis_registry.build_redis_key("daily_report", FIRE)
        == f"{namespace}:cron_dispatch:daily_report:1704110400"
    )
    assert (
        redis_registry.build_redis_key("a:b", 1704110400.9)
        == f"{namespace}:cron_dispatch:a:b:1704110400"
    )
    assert RedisDispatchRegistry(redis_client).build_redis_key("x", 0) == "kaal:cron_dispatch:x:0"
    assert (
        redis_registry.build_index_key("daily_report")
        == f"{namespace}:cron_dispatch_index:daily_report"
    )


def test_log_stores_the_reference_json_with_a_ttl(
    redis_client: redis.Redis, namespace: str
) -> None:
    registry = RedisDispatchRegistry(redis_client, namespace=namespace, ttl=120)
    record = registry.log_dispatch("daily_report", FIRE, "node-1")
    redis_key = f"{namespace}:cron_dispatch:daily_report:1704110400"
    raw = redis_client.get(redis_key)
    assert (
        raw
        == (
            '{"key":"daily_report","fire_time":1704110400,'
            f'"dispatched_at":{int(record.dispatched_at.timestamp())},'
            '"node_id":"node-1","status":"dispatched"}'
        ).encode()
    )
    assert list(json.loads(raw)) == [
        "key",
        "fire_time",
        "dispatched_at",
        "node_id",
        "status",
    ]
    assert 115 <= redis_client.ttl(redis_key) <= 120
    index_key = f"{namespace}:cron_dispatch_index:daily_report"
    assert 115 <= redis_client.ttl(index_key) <= 120
    assert redis_client.zrange(index_key, 0, -1, withscores=True) == [(b"1704110400", 1704110400.0)]


def test_the_default_ttl_reaches_redis(
    redis_registry: RedisDispatchRegistry, redis_client: redis.Redis
) -> None:
    redis_registry.log_dispatch("daily_report", FIRE, "node-1")
    redis_registry.claim_dispatch("daily_report", FIRE + timedelta(hours=1), "n")
    for fire in (FIRE, FIRE + timedelta(hours=1)):
        ttl = redis_client.ttl(redis_registry.build_redis_key("daily_report", fire))
        assert WEEK - 5 <= ttl <= WEEK


def test_claim_stores_the_winner_with_a_ttl(redis_client: redis.Redis, namespace: str) -> None:
    registry = RedisDispatchRegistry(redis_client, namespace=namespace, ttl=300)
    assert registry.claim_dispatch("daily_report", FIRE, "node-1")
    assert not registry.claim_dispatch("daily_report", FIRE, "node-2")
    redis_key = registry.build_redis_key("daily_report", FIRE)
    raw = redis_client.get(redis_key)
    assert isinstance(raw, bytes)
    stored = json.loads(raw)
    assert stored["node_id"] == "node-1"
    assert stored["status"] == "dispatched"
    assert 295 <= redis_client.ttl(redis_key) <= 300


def test_the_index_keeps_only_the_newest_fires(
    redis_registry: RedisDispatchRegistry, redis_client: redis.Redis
) -> None:
    bound = redis_registry.HISTORY_BOUND
    for i in range(bound + 3):
        redis_registry.log_dispatch("every_second", FIRE_EPOCH + i, "n")
    index_key = redis_registry.build_index_key("every_second")
    assert redis_client.zcard(index_key) == bound
    assert redis_client.zrange(index_key, 0, 0) == [str(FIRE_EPOCH + 3).encode()]


def test_history_skips_a_record_that_expired(
    redis_registry: RedisDispatchRegistry, redis_client: redis.Redis
) -> None:
    for minute in range(5):
        redis_registry.log_dispatch("r", FIRE + timedelta(minutes=minute), "n")
    gone = redis_registry.build_redis_key("r", FIRE + timedelta(minutes=3))
    redis_client.pexpire(gone, 1)
    wait_until(lambda: not redis_client.exists(gone), "the record did not expire")
    history = redis_registry.history("r", limit=3)
    assert [d.fire_time for d in history] == [FIRE + timedelta(minutes=m) for m in (4, 2, 1)]


def test_records_expire_on_the_server(redis_client: redis.Redis, namespace: str) -> None:
    registry = RedisDispatchRegistry(redis_client, namespace=namespace, ttl=1)
    registry.log_dispatch("daily_report", FIRE, "node-1")
    assert 0 < redis_client.pttl(registry.build_redis_key("daily_report", FIRE)) <= 1000
    wait_until(
        lambda: not registry.is_dispatched("daily_report", FIRE), "the record outlived its ttl"
    )
    assert registry.history("daily_report") == []
    assert registry.claim_dispatch("daily_report", FIRE, "node-2")


def test_a_record_written_by_the_reference_is_read(
    redis_registry: RedisDispatchRegistry, redis_client: redis.Redis
) -> None:
    # What Kaal's RedisEngine (Ruby JSON.generate) stores.
    redis_client.set(
        redis_registry.build_redis_key("reports:daily", FIRE),
        '{"key":"reports:daily","fire_time":1704110400,"dispatched_at":1704110401,'
        '"node_id":"web-1","status":"dispatched"}',
    )
    assert redis_registry.find_dispatch("reports:daily", FIRE) == Dispatch(
        key="reports:daily",
        fire_time=FIRE,
        dispatched_at=FIRE + timedelta(seconds=1),
        node_id="web-1",
        status="dispatched",
    )


def test_a_corrupt_record_names_its_key(
    redis_registry: RedisDispatchRegistry, redis_client: redis.Redis
) -> None:
    redis_key = redis_registry.build_redis_key("daily_report", FIRE)
    redis_client.set(redis_key, b"{oops")
    with pytest.raises(CorruptDispatch, match=redis_key):
        redis_registry.find_dispatch("daily_report", FIRE)


def test_unicode_keys_and_decoded_responses(redis_server: Any, namespace: str) -> None:
    client = redis_server.client(decode_responses=True)
    try:
        registry = RedisDispatchRegistry(client, namespace=namespace)
        logged = registry.log_dispatch("rapport_é_🚀", FIRE, "nœud-1")
        assert registry.find_dispatch("rapport_é_🚀", FIRE) == logged
        assert registry.history("rapport_é_🚀") == [logged]
        raw = client.get(f"{namespace}:cron_dispatch:rapport_é_🚀:{FIRE_EPOCH}")
        assert '"node_id":"nœud-1"' in raw
    finally:
        client.close()


@pytest.mark.parametrize("bad", ["", "a b", "{kaal}", "x\n"])
def test_a_bad_namespace_is_refused(redis_client: redis.Redis, bad: str) -> None:
    with pytest.raises(ValueError, match="namespace"):
        RedisDispatchRegistry(redis_client, namespace=bad)


def test_a_namespace_must_be_text(redis_client: redis.Redis) -> None:
    with pytest.raises(TypeError, match="namespace"):
        RedisDispatchRegistry(redis_client, namespace=b"kaal")  # type: ignore[arg-type]


def test_redis_down_raises_dispatch_unavailable() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    # Nothing listens on the port any more; no retries, so the test is quick.
    client = redis.Redis(port=port, socket_connect_timeout=0.5, retry=Retry(NoBackoff(), 0))
    registry = RedisDispatchRegistry(client, namespace="down")
    calls: list[Callable[[], object]] = [
        lambda: registry.find_dispatch("k", FIRE),
        lambda: registry.is_dispatched("k", FIRE),
        lambda: registry.log_dispatch("k", FIRE, "n"),
        lambda: registry.claim_dispatch("k", FIRE, "n"),
        lambda: registry.history("k"),
    ]
    for call in calls:
        with pytest.raises(DispatchUnavailable) as caught:
            call()
        assert isinstance(caught.value, LedgerUnavailable)
        assert isinstance(caught.value.__cause__, redis.ConnectionError)


# Each process claims two fires of one key, racing the others for both.
CLAIM_IN_A_PROCESS = """
import json, sys
import redis
from django_ledger.core.dispatch import RedisDispatchRegistry

url, namespace, key, epoch, node_id = sys.argv[1:]
client = redis.Redis.from_url(url)
registry = RedisDispatchRegistry(client, namespace=namespace)
client.incr(f"{namespace}:test:ready")
if client.blpop([f"{namespace}:test:go"], timeout=30) is None:
    sys.exit("no go signal")
first = registry.claim_dispatch(key, int(epoch), node_id)
second = registry.claim_dispatch(key, int(epoch) + 60, node_id)
print(json.dumps([first, second]))
"""


@pytest.mark.standalone_only(reason="its claimer processes connect to the standalone URL")
def test_one_of_many_processes_wins_each_claim(
    redis_server: Any, redis_client: redis.Redis, namespace: str
) -> None:
    contenders = 8
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    processes = {
        f"node-{i}": subprocess.Popen(
            [
                *(sys.executable, "-c", CLAIM_IN_A_PROCESS),
                *(redis_server.url, namespace, "daily_report", str(FIRE_EPOCH), f"node-{i}"),
            ],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for i in range(contenders)
    }
    results: dict[str, list[bool]] = {}
    try:
        # Release them together, once every one is connected and waiting.
        def all_ready() -> bool:
            assert all(p.poll() is None for p in processes.values()), "a claimer died"
            return int(redis_client.get(f"{namespace}:test:ready") or 0) >= contenders

        wait_until(all_ready, "the claimers did not start", timeout=60)
        redis_client.rpush(f"{namespace}:test:go", *["go"] * contenders)
        for node_id, process in processes.items():
            out, err = process.communicate(timeout=60)
            assert process.returncode == 0, err.decode()
            results[node_id] = json.loads(out)
    finally:
        for process in processes.values():
            if process.poll() is None:
                process.kill()
                process.wait()

    assert len(results) == contenders
    registry = RedisDispatchRegistry(redis_client, namespace=namespace)
    for fire_index, fire_time in enumerate((FIRE, FIRE + timedelta(minutes=1))):
        winners = [node for node, won in results.items() if won[fire_index]]
        assert len(winners) == 1, f"fire {fire_time}: {winners}"
        found = registry.find_dispatch("daily_report", fire_time)
        assert found is not None
        assert (found.node_id, found.status) == (winners[0], "dispatched")
    assert [d.fire_time for d in registry.history("daily_report")] == [
        FIRE + timedelta(minutes=1),
        FIRE,
    ]


# -- memory only ---------------------------------------------------------------


def test_memory_records_expire_by_the_injected_clock() -> None:
    clock = FakeClock(1_700_000_000.0)
    registry = MemoryDispatchRegistry(ttl=60, clock=clock)
    record = registry.log_dispatch("daily_report", FIRE, "node-1")
    assert record.dispatched_at == datetime.fromtimestamp(1_700_000_000, UTC)
    clock.advance(59.999)
    assert registry.find_dispatch("daily_report", FIRE) == record
    assert registry.history("daily_report") == [record]
    assert not registry.claim_dispatch("daily_report", FIRE, "node-2")
    clock.advance(0.001)
    assert registry.find_dispatch("daily_report", FIRE) is None
    assert registry.history("daily_report") == []
    assert registry.claim_dispatch("daily_report", FIRE, "node-2")


def test_memory_sweeps_expired_records() -> None:
    clock = FakeClock()
    registry = MemoryDispatchRegistry(ttl=10, clock=clock)
    for i in range(100):
        registry.log_dispatch(f"job-{i}", FIRE, "n")
    clock.advance(11)
    registry.log_dispatch("fresh", FIRE, "n")
    assert len(registry._records) == 1
    assert list(registry._indexes) == ["fresh"]


# -- the module ----------------------------------------------------------------


def test_the_module_imports_no_django() -> None:
    tree = ast.parse(Path(dispatch.__file__).read_text())
    imported: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            imported.add(node.module)
    assert imported
    assert not {name for name in imported if name.split(".")[0] == "django"}


def test_importing_the_registry_loads_no_django() -> None:
    probe = (
        "import sys, django_ledger.core.dispatch; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'django'))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"


def test_the_public_names_exist() -> None:
    for name in dispatch.__all__:
        assert hasattr(dispatch, name)
