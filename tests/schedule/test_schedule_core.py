"""The scheduler's core needs no Django: a tick runs where ``django`` cannot be imported."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import redis

from django_ledger.core.schedule import state_key
from tests.support.redis_server import RedisServer

ROOT = Path(__file__).resolve().parents[2]

_PROBE = """
import sys

class NoDjango:
    def find_spec(self, name, path=None, target=None):
        if name == "django" or name.startswith("django."):
            raise ImportError(f"the scheduler's core imported {name}")
        return None

sys.meta_path.insert(0, NoDjango())
import redis
from django_ledger.core import Ledger, RedisDispatchRegistry
from django_ledger.core.schedule import Every, Schedule, ScheduleStore, Ticker

client = redis.Redis.from_url(sys.argv[1])
namespace = sys.argv[2]
ledger = Ledger(client, namespace, "default")
store = ScheduleStore(client, namespace)
ticker = Ticker(
    store,
    RedisDispatchRegistry(client, namespace=namespace),
    lambda fire: ledger.admit(fire.request_id, "{}").status,
    "probe",
)
now = store.server_time_ms() // 1000
store.set_through("probe", now - 2)
report = ticker.tick([Schedule("probe", Every(1))])
assert report.admitted >= 1, report
print(sorted({m.split(".")[0] for m in sys.modules} & {"django", "rest_framework"}))
"""


def test_a_tick_runs_with_django_unimportable(
    redis_server: RedisServer, redis_client: redis.Redis, namespace: str
) -> None:
    out = subprocess.run(
        [sys.executable, "-c", _PROBE, redis_server.url, namespace],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    redis_client.delete(state_key(namespace))

    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
