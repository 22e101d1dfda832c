"""One Redis Cluster master down: the queues on the live masters go on.

A plain redis-py ``RedisCluster`` first, without the ledger, to say what the client does
(whichever redis-py is installed); a live master's queue while the master the client
picked as its default node is dead (redis-py 8.1 asked that node for each ``FCALL``'s
keys, so every call failed); then a real ``ledger_worker --scheduler`` process
on a 3-master cluster whose schedules fire into a queue on a live master and a queue on
the master that is killed: the live queue's fires are admitted and run throughout the
outage, and the dead queue's fires, owed meanwhile, are admitted once each and run when
its master is back.

Three masters, because Redis itself stops a master from serving (``CLUSTERDOWN``) once
it cannot reach a majority of the masters for ``cluster-node-timeout``: with two masters,
one dead leaves the other in the minority (docs/cluster.md).
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import threading
import uuid
from collections import Counter
from pathlib import Path

import pytest
from redis.cluster import ClusterNode, RedisCluster
from redis.exceptions import ConnectionError as RedisConnectionError

from django_ledger.connections import CLUSTER_RETRIES, client_for, reset_connections
from django_ledger.core.errors import LedgerUnavailable
from django_ledger.core.ledger import Ledger
from django_ledger.core.records import State
from django_ledger.core.schedule import state_key
from tests.support.cluster_server import redis_cluster, slot_owner
from tests.support.redis_server import RedisServer
from tests.support.tasks_helpers import wait_until

pytestmark = pytest.mark.standalone_only("starts a cluster of its own")

ROOT = Path(__file__).resolve().parents[2]
ADMITTED = re.compile(r"admitted (schedule:(\S+):(\d+)) at ")


def test_a_plain_cluster_client_reads_a_live_master_while_another_is_dead() -> None:
    with redis_cluster(3) as nodes:
        client = RedisCluster(
            startup_nodes=[ClusterNode("127.0.0.1", node.port) for node in nodes],
            socket_connect_timeout=1,
            socket_timeout=5,
        )
        keys: dict[int, str] = {}
        for n in range(200):
            keys.setdefault(slot_owner(nodes, f"{{k{n}}}").port, f"{{k{n}}}")
        dead_key, *live_keys = keys.values()
        for key in keys.values():
            client.set(key, "1")
        slot_owner(nodes, dead_key).kill()
        for _ in range(2):
            with pytest.raises(RedisConnectionError):
                client.get(dead_key)
            assert [client.get(key) for key in live_keys] == [b"1", b"1"]
        client.close()


class Refuser:
    """Listens on a dead node's port, counting each connection and closing it at once."""

    def __init__(self, port: int) -> None:
        self.connections = 0
        self._listener = socket.create_server(("127.0.0.1", port), reuse_port=False)
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            self.connections += 1
            conn.close()

    def close(self) -> None:
        self._listener.close()


def test_a_call_on_a_dead_masters_queue_tries_that_master_twice_at_most() -> None:
    with redis_cluster(3) as nodes:
        spec = {"CLUSTER": [f"127.0.0.1:{node.port}" for node in nodes]}
        namespace = f"t{uuid.uuid4().hex[:10]}"
        dead = slot_owner(nodes, f"{{{namespace}:emails}}")
        ledger = Ledger(client_for(spec), namespace, "emails")
        try:
            ledger.admit("before", "x")
            dead.kill()
            refuser = Refuser(dead.port)
            try:
                for n in range(3):
                    refuser.connections = 0
                    with pytest.raises(LedgerUnavailable):
                        ledger.admit(f"while-{n}", "x")
                    # The first send and the ledger's one retry: not redis-py 8.2's eleven.
                    assert 1 <= refuser.connections <= 1 + CLUSTER_RETRIES
            finally:
                refuser.close()
        finally:
            reset_connections()


def test_a_live_masters_queue_answers_while_the_clients_default_node_is_dead() -> None:
    """A cluster client sends some commands to its default node (one master it picked at
    start); a ledger call goes to its keys' master alone, whichever master that is."""
    with redis_cluster(3) as nodes:
        spec = {"CLUSTER": [f"127.0.0.1:{node.port}" for node in nodes]}
        namespace = placed(nodes)[0]
        dead = slot_owner(nodes, f"{{{namespace}:emails}}")
        client = client_for(spec)
        client.set_default_node(client.get_node("127.0.0.1", dead.port))
        live = Ledger(client, namespace, "default")
        try:
            live.admit("before", "x")
            dead.kill()
            for n in range(3):
                assert live.admit(f"while-{n}", "x").status.name == "ADMITTED"
                claim = live.claim("w")
                assert claim is not None
                assert live.settle(claim, State.COMPLETED).status.name == "SETTLED"
            assert live.stats().completed == 3
        finally:
            reset_connections()


def placed(nodes: list[RedisServer]) -> tuple[str, RedisServer]:
    """A namespace whose ``emails`` queue alone lives on a master of its own; that master."""
    while True:
        namespace = f"t{uuid.uuid4().hex[:10]}"
        dead = slot_owner(nodes, f"{{{namespace}:emails}}")
        # The live queue, the schedules' state and the test app's signal list elsewhere.
        live = [f"{{{namespace}:default}}", state_key(namespace), f"{namespace}:test-signals"]
        if all(slot_owner(nodes, key) is not dead for key in live):
            return namespace, dead


def completed_epochs(ledger: Ledger, key: str) -> set[int]:
    prefix = f"schedule:{key}:"
    epochs = set()
    for raw in ledger.redis.hkeys(ledger.records_key):
        request_id = raw.decode()
        if not request_id.startswith(prefix):
            continue
        record = ledger.resolve(request_id)
        if record is not None and record.state is State.COMPLETED:
            epochs.add(int(request_id[len(prefix) :]))
    return epochs


def test_a_worker_and_its_scheduler_serve_the_live_masters_and_catch_up_after_one_returns(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    with redis_cluster(3) as nodes:
        namespace, dead = placed(nodes)
        schedules = {
            "live": {
                "TASK": "tests.support.tasks_app.tasks.noop",
                "EVERY": 1,
                "MISFIRE": "all",
                "GRACE": 600,
            },
            "away": {
                "TASK": "tests.support.tasks_app.tasks.on_emails",
                "ARGS": [1],
                "EVERY": 1,
                "MISFIRE": "all",
                "GRACE": 600,
            },
        }
        env = {
            **os.environ,
            "REDIS_URL": redis_server.url,
            "REDIS_CLUSTER": ",".join(f"127.0.0.1:{node.port}" for node in nodes),
            "LEDGER_NAMESPACE": namespace,
            "LEDGER_SCHEDULES": json.dumps(schedules),
            "DJANGO_SETTINGS_MODULE": "tests.support.tasks_app.settings",
            "PYTHONPATH": str(ROOT),
            "PYTHONUNBUFFERED": "1",
        }
        log = tmp_path / "worker.log"
        with log.open("wb") as out:
            worker = subprocess.Popen(
                [sys.executable, "manage.py", "ledger_worker", "--scheduler", "--no-relay"],
                cwd=ROOT,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        client = RedisCluster(
            startup_nodes=[ClusterNode("127.0.0.1", node.port) for node in nodes],
            socket_connect_timeout=1,
            socket_timeout=5,
        )
        live = Ledger(client, namespace, "default")
        away = Ledger(client, namespace, "emails")
        try:
            wait_until(lambda: len(completed_epochs(live, "live")) >= 2, 60)
            wait_until(lambda: len(completed_epochs(away, "away")) >= 2, 60)

            dead.kill()
            killed_at = live.stats().now // 1000
            before = completed_epochs(live, "live")
            # While the master is down, the live queue's fires go on being admitted and run.
            wait_until(
                lambda: len({e for e in completed_epochs(live, "live") if e > killed_at}) >= 4, 60
            )
            assert worker.poll() is None, log.read_text(errors="replace")[-3000:]

            dead.restart()
            back_at = live.stats().now // 1000
            # Back (empty: it kept nothing), its queue is served again, and every fire owed
            # since the kill (MISFIRE "all") is admitted and run.
            owed = set(range(killed_at + 1, back_at + 1))
            wait_until(lambda: owed <= completed_epochs(away, "away"), 90)
            after = completed_epochs(live, "live")
        finally:
            worker.terminate()
            code = worker.wait(60)
            client.close()
        output = log.read_text(errors="replace")
        assert code == 0, output[-3000:]
        assert before <= after
        # Every fire admitted once, across the whole run, for both schedules.
        admitted = Counter(request_id for request_id, _, _ in ADMITTED.findall(output))
        assert admitted and set(admitted.values()) == {1}, admitted.most_common(3)
        # The live schedule's fires have no gap across the outage.
        epochs = sorted(e for e in after if e >= min(before))
        assert epochs == list(range(epochs[0], epochs[-1] + 1))
        assert "Redis unavailable" in output  # the dead queue's fires were said to wait
