"""A throwaway Redis Cluster for tests: a few masters of the suite's own, no replicas.

Each node is a ``RedisServer`` with cluster mode on; the slots are split evenly between
them in order, and the cluster keeps serving the slots of the nodes that are up when
another one dies (``cluster-require-full-coverage no``), as a queue on a live node does.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager

from redis.crc import REDIS_CLUSTER_HASH_SLOTS, key_slot

from tests.redis_server import FORBIDDEN_PORT, RedisServer, RedisServerError

FORM_TIMEOUT = 30.0
#: A node also listens on its port + 10000 (the cluster bus), so its port must be below.
BUS_OFFSET = 10_000
NODE_ATTEMPTS = 5


def node_args() -> list[str]:
    return [
        "--cluster-enabled", "yes",
        "--cluster-config-file", "nodes.conf",
        "--cluster-require-full-coverage", "no",
        "--cluster-node-timeout", "2000",
    ]  # fmt: skip


@contextmanager
def redis_cluster(masters: int = 1) -> Iterator[list[RedisServer]]:
    """Start ``masters`` cluster nodes, give each an even share of the slots, and join them."""
    nodes: list[RedisServer] = []
    try:
        for _ in range(masters):
            nodes.append(_start_node())
        share = REDIS_CLUSTER_HASH_SLOTS // masters
        for index, node in enumerate(nodes):
            last = REDIS_CLUSTER_HASH_SLOTS - 1 if index == masters - 1 else (index + 1) * share - 1
            with node.client() as client:
                client.execute_command("CLUSTER", "ADDSLOTSRANGE", index * share, last)
                for other in nodes[index + 1 :]:
                    client.execute_command("CLUSTER", "MEET", "127.0.0.1", other.port)
        _wait_until_formed(nodes)
        yield nodes
    finally:
        for node in nodes:
            node.cleanup()


def slot_owner(nodes: list[RedisServer], key: str) -> RedisServer:
    """Return the node that serves ``key`` (slots split as ``redis_cluster`` splits them)."""
    share = REDIS_CLUSTER_HASH_SLOTS // len(nodes)
    return nodes[min(key_slot(key.encode()) // share, len(nodes) - 1)]


def _start_node() -> RedisServer:
    for attempt in range(NODE_ATTEMPTS):
        node = RedisServer(port=_node_port(), extra_args=node_args())
        try:
            return node.start()
        except RedisServerError:
            node.cleanup()  # someone took the port or its bus port meanwhile: choose again
            if attempt == NODE_ATTEMPTS - 1:
                raise
    raise AssertionError("unreachable")


def _node_port() -> int:
    """Return a free loopback port whose cluster bus port is free too."""
    while True:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind(("127.0.0.1", 0))
            port: int = sock.getsockname()[1]
        if port == FORBIDDEN_PORT or port + BUS_OFFSET > 65_535:
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as bus:
            try:
                bus.bind(("127.0.0.1", port + BUS_OFFSET))
            except OSError:
                continue
        return port


def _wait_until_formed(nodes: list[RedisServer]) -> None:
    deadline = time.monotonic() + FORM_TIMEOUT
    while time.monotonic() < deadline:
        states = []
        for node in nodes:
            with node.client() as client:
                info = client.cluster("info")
            states.append(
                info["cluster_state"] == "ok"
                and int(info["cluster_known_nodes"]) == len(nodes)
                and int(info["cluster_slots_assigned"]) == REDIS_CLUSTER_HASH_SLOTS
            )
        if all(states):
            return
        time.sleep(0.05)
    raise RedisServerError(f"the cluster of {len(nodes)} node(s) did not form in {FORM_TIMEOUT} s")
