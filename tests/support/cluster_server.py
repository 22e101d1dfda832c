"""A throwaway Redis Cluster for tests, formed by ``redis-cli --cluster create``.

``LocalCluster(masters=3, replicas=0)`` starts ``masters * (1 + replicas)`` cluster-enabled
``RedisServer``s on free loopback ports (each with its bus port, +10000, free too), joins
them with ``redis-cli --cluster create ... --cluster-yes`` and waits until every node
agrees: the slots all served, every replica in sync with its master. Without a
``redis-cli`` (``$REDIS_CLI_BIN``, next to the redis-server, or on ``PATH``) it sends the
same CLUSTER commands itself (as it does for fewer than three masters, which redis-cli
refuses). The suite's cluster mode starts one per test process
(``tests/support/redis_plugin.py``); the failover tests start their own, with replicas.

``redis_cluster(masters)`` is a shorthand for tests that need only the nodes: a
``LocalCluster`` that keeps serving the live nodes' slots when one dies
(``cluster-require-full-coverage no``), stopped when the block ends; ``slot_owner(nodes,
key)`` says which of them serves a key. This module is the suite's one way to start a
cluster.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import Any

import redis
from redis.cluster import ClusterNode, RedisCluster
from redis.crc import REDIS_CLUSTER_HASH_SLOTS, key_slot

from tests.support.redis_server import FORBIDDEN_PORT, RedisServer, RedisServerError, find_binary

#: How long a cluster may take to form, or a replica to take over a dead master.
FORM_TIMEOUT = 60.0
#: A node also listens on its port + 10000 (the cluster bus), so its port must be below.
BUS_OFFSET = 10_000
NODE_ATTEMPTS = 5


def find_cli() -> str | None:
    """Return the redis-cli to form clusters with, or ``None`` (then CLUSTER commands do)."""
    configured = os.environ.get("REDIS_CLI_BIN")
    if configured:
        if not os.access(configured, os.X_OK):
            raise RedisServerError(f"REDIS_CLI_BIN={configured!r} is not an executable file")
        return configured
    sibling = Path(find_binary()).with_name("redis-cli")
    if os.access(sibling, os.X_OK):
        return str(sibling)
    return shutil.which("redis-cli")


def cluster_port() -> int:
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


@contextmanager
def redis_cluster(masters: int = 1, **kwargs: Any) -> Iterator[list[RedisServer]]:
    """Start a ``LocalCluster`` of ``masters`` masters that serves what it can; yield its nodes.

    Nodes that stay up go on serving their slots when another one dies
    (``cluster-require-full-coverage no``), as a queue on a live node does; ``kwargs``
    go to ``LocalCluster``. The nodes are stopped when the block ends.
    """
    extra = ("--cluster-require-full-coverage", "no", *kwargs.pop("extra_args", ()))
    kwargs.setdefault("node_timeout_ms", 2000)
    with LocalCluster(masters, extra_args=extra, **kwargs) as cluster:
        yield list(cluster.nodes)


def slot_owner(nodes: Sequence[RedisServer], key: str) -> RedisServer:
    """Return the node of ``nodes`` that serves ``key``'s slot now (asked of a running node)."""
    slot = key_slot(key.encode())
    for node in nodes:
        if not node.running:
            continue
        with node.client(socket_timeout=2) as client:
            ranges = client.execute_command("CLUSTER", "SLOTS")
        for low, high, master, *_ in ranges:
            if low <= slot <= high:
                return next(n for n in nodes if n.port == int(master[1]))
    raise RedisServerError(f"no running node says who serves slot {slot}")


class LocalCluster:
    """A Redis Cluster of local redis-servers: ``masters`` masters, ``replicas`` each."""

    def __init__(
        self,
        masters: int = 3,
        replicas: int = 0,
        *,
        node_timeout_ms: int = 5000,
        use_cli: bool | None = None,
        extra_args: Sequence[str] = (),
    ) -> None:
        if masters < 1 or replicas < 0:
            raise ValueError("a cluster needs at least one master and no negative replicas")
        self.masters_wanted = masters
        self.replicas_wanted = replicas
        self.node_timeout_ms = node_timeout_ms
        self.extra_args = tuple(extra_args)
        self._use_cli = use_cli
        self.nodes: list[RedisServer] = []

    # -- addresses -----------------------------------------------------------

    @property
    def startup_nodes(self) -> list[str]:
        """Every node as ``host:port``, as ``LEDGER['CONNECTION'] = {"CLUSTER": [...]}`` takes."""
        return [f"127.0.0.1:{node.port}" for node in self.nodes]

    def client(self, **kwargs: Any) -> RedisCluster:
        """Return a new cluster client; ``kwargs`` go to ``RedisCluster``."""
        nodes = [ClusterNode("127.0.0.1", node.port) for node in self.nodes if node.running]
        return RedisCluster(startup_nodes=nodes, **kwargs)

    def node_at(self, port: int) -> RedisServer:
        for node in self.nodes:
            if node.port == port:
                return node
        raise RedisServerError(f"no node of this cluster listens on port {port}")

    def masters(self) -> list[RedisServer]:
        """The running nodes that are masters now, in the order they were started."""
        return [node for node in self.nodes if node.running and self._role(node) == "master"]

    def master_of(self, key: str) -> RedisServer:
        """Return the node that serves ``key``'s slot now (asked of the cluster itself)."""
        return self.master_of_slot(key_slot(key.encode()))

    def master_of_slot(self, slot: int) -> RedisServer:
        for node in self.nodes:
            if not node.running:
                continue
            try:
                with node.client(socket_timeout=2) as client:
                    ranges = client.execute_command("CLUSTER", "SLOTS")
            except redis.RedisError:
                continue
            for low, high, master, *_ in ranges:
                if low <= slot <= high:
                    return self.node_at(int(master[1]))
        raise RedisServerError(f"no running node says who serves slot {slot}")

    def slot_ranges(self) -> dict[int, list[tuple[int, int]]]:
        """Return master port -> the slot ranges it serves, as a running node sees them."""
        for node in self.nodes:
            if not node.running:
                continue
            try:
                with node.client(socket_timeout=2) as client:
                    ranges = client.execute_command("CLUSTER", "SLOTS")
            except redis.RedisError:
                continue
            served: dict[int, list[tuple[int, int]]] = {}
            for low, high, master, *_ in ranges:
                served.setdefault(int(master[1]), []).append((int(low), int(high)))
            return served
        raise RedisServerError("no running node answers CLUSTER SLOTS")

    def queue_on(self, master: RedisServer, namespace: str, stem: str = "q") -> str:
        """Return a queue name whose keys (hash tag ``{namespace:name}``) live on ``master``."""
        ranges = self.slot_ranges()[master.port]
        for number in range(100_000):
            name = f"{stem}{number}"
            slot = key_slot(f"{{{namespace}:{name}}}".encode())
            if any(low <= slot <= high for low, high in ranges):
                return name
        raise AssertionError(f"no queue name {stem}N lands on {master!r}")

    def replicas_of(self, master: RedisServer) -> list[RedisServer]:
        """The running replicas of ``master``, as ``master`` lists them."""
        with master.client() as client:
            info = client.info("replication")
        ports = {int(info[key]["port"]) for key in info if key.startswith("slave")}
        return [node for node in self.nodes if node.port in ports and node.running]

    # -- lifecycle -----------------------------------------------------------

    def start(self) -> LocalCluster:
        """Start every node, form the cluster and wait until it serves every slot."""
        try:
            for _ in range(self.masters_wanted * (1 + self.replicas_wanted)):
                self.nodes.append(self._start_node())
            # redis-cli refuses to create a cluster of fewer than three masters.
            cli = find_cli() if self._use_cli is not False and self.masters_wanted >= 3 else None
            if self._use_cli and cli is None:
                raise RedisServerError("redis-cli (and at least 3 masters) needed to form with it")
            if cli is not None:
                self._create_with_cli(cli)
            else:
                self._create_with_commands()
            self.wait_until_healthy()
        except BaseException:
            self.cleanup()
            raise
        return self

    def cleanup(self) -> None:
        """Kill every node and delete their directories."""
        for node in self.nodes:
            node.cleanup()
        self.nodes = []

    def __enter__(self) -> LocalCluster:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.cleanup()

    def __repr__(self) -> str:
        return (
            f"<LocalCluster {self.masters_wanted}x(1+{self.replicas_wanted}) {self.startup_nodes}>"
        )

    # -- waiting ---------------------------------------------------------------

    def wait_until_healthy(self, timeout: float = FORM_TIMEOUT) -> None:
        """Wait until every running node sees the whole cluster ok, replicas in sync."""
        deadline = time.monotonic() + timeout
        problem = "not asked yet"
        while time.monotonic() < deadline:
            problem = self._health_problem()
            if problem is None:
                return
            time.sleep(0.05)
        raise RedisServerError(f"{self!r} is not healthy after {timeout:.0f} s: {problem}")

    def wait_for_failover(
        self, slot: int, dead: RedisServer, timeout: float = FORM_TIMEOUT
    ) -> RedisServer:
        """Wait until a running node serves ``slot`` in place of ``dead``; return it."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                master = self.master_of_slot(slot)
            except RedisServerError:
                master = dead
            if master is not dead and master.running and self._role(master) == "master":
                with master.client() as client:
                    if client.cluster("info")["cluster_state"] == "ok":
                        return master
            time.sleep(0.05)
        raise RedisServerError(f"no replica took slot {slot} over from {dead!r} in {timeout:.0f} s")

    # -- internals -------------------------------------------------------------

    def _node_args(self) -> list[str]:
        return [
            "--cluster-enabled", "yes",
            "--cluster-config-file", "nodes.conf",
            "--cluster-node-timeout", str(self.node_timeout_ms),
            # A replica takes over however long it was cut off: tests kill masters on purpose.
            "--cluster-replica-validity-factor", "0",
            "--cluster-allow-replica-migration", "no",
            # Replicas sync at once, not 5 s later (Redis 7's default diskless delay).
            "--repl-diskless-sync-delay", "0",
            *self.extra_args,
        ]  # fmt: skip

    def _start_node(self) -> RedisServer:
        for attempt in range(NODE_ATTEMPTS):
            node = RedisServer(port=cluster_port(), extra_args=self._node_args())
            try:
                return node.start()
            except RedisServerError:
                node.cleanup()  # someone took the port or its bus port meanwhile: again
                if attempt == NODE_ATTEMPTS - 1:
                    raise
        raise AssertionError("unreachable")

    def _create_with_cli(self, cli: str) -> None:
        command = [
            cli, "--cluster", "create", *self.startup_nodes,
            "--cluster-replicas", str(self.replicas_wanted), "--cluster-yes",
        ]  # fmt: skip
        try:
            done = subprocess.run(
                command, capture_output=True, text=True, timeout=FORM_TIMEOUT, check=False
            )
        except subprocess.TimeoutExpired as exc:
            raise RedisServerError(f"{' '.join(command)} did not finish: {exc}") from exc
        if done.returncode != 0:
            raise RedisServerError(
                f"{' '.join(command)} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}"
            )

    def _create_with_commands(self) -> None:
        masters = self.nodes[: self.masters_wanted]
        share = REDIS_CLUSTER_HASH_SLOTS // len(masters)
        for index, node in enumerate(masters):
            last = (
                (index + 1) * share - 1
                if index < len(masters) - 1
                else REDIS_CLUSTER_HASH_SLOTS - 1
            )
            with node.client() as client:
                client.execute_command("CLUSTER", "ADDSLOTSRANGE", index * share, last)
                client.execute_command("CLUSTER", "SET-CONFIG-EPOCH", index + 1)
        with self.nodes[0].client() as client:
            for other in self.nodes[1:]:
                client.execute_command("CLUSTER", "MEET", "127.0.0.1", other.port)
        self._wait_until_known()
        ids = []
        for node in masters:
            with node.client() as client:
                ids.append(client.execute_command("CLUSTER", "MYID").decode())
        for index, node in enumerate(self.nodes[self.masters_wanted :]):
            with node.client() as client:
                client.execute_command("CLUSTER", "REPLICATE", ids[index % len(ids)])

    def _wait_until_known(self) -> None:
        deadline = time.monotonic() + FORM_TIMEOUT
        while time.monotonic() < deadline:
            known = []
            for node in self.nodes:
                with node.client() as client:
                    known.append(int(client.cluster("info")["cluster_known_nodes"]))
            if all(count == len(self.nodes) for count in known):
                return
            time.sleep(0.05)
        raise RedisServerError(f"the nodes of {self!r} did not meet in {FORM_TIMEOUT:.0f} s")

    def _role(self, node: RedisServer) -> str:
        with node.client(socket_timeout=2) as client:
            role = client.execute_command("ROLE")
        return str(role[0].decode() if isinstance(role[0], bytes) else role[0])

    def _health_problem(self) -> str | None:
        """Say what keeps the cluster from being healthy, or ``None``."""
        running = [node for node in self.nodes if node.running]
        for node in running:
            try:
                with node.client(socket_timeout=2) as client:
                    info = client.cluster("info")
                    lines = client.execute_command("CLUSTER", "NODES").decode().splitlines()
                    replication = client.info("replication")
            except redis.RedisError as exc:
                return f"node {node.port} does not answer: {exc}"
            if info["cluster_state"] != "ok":
                return f"node {node.port} says the cluster is {info['cluster_state']}"
            if int(info["cluster_slots_assigned"]) != REDIS_CLUSTER_HASH_SLOTS:
                return f"node {node.port} sees {info['cluster_slots_assigned']} slots assigned"
            seen = {
                int(line.split()[1].split(":")[1].split("@")[0]): line.split()[2] for line in lines
            }
            for other in running:
                flags = seen.get(other.port)
                if flags is None:
                    return f"node {node.port} does not know node {other.port} yet"
                if "fail" in flags or "handshake" in flags or "noaddr" in flags:
                    return f"node {node.port} flags node {other.port} {flags}"
            masters_seen = sum(
                1 for line in lines if "master" in line.split()[2] and len(line.split()) > 8
            )
            if masters_seen < self.masters_wanted:
                return f"node {node.port} sees {masters_seen} masters with slots"
            if replication["role"] == "slave" and replication.get("master_link_status") != "up":
                return f"replica {node.port} is not in sync with its master yet"
        wanted = self.masters_wanted * self.replicas_wanted
        replicas = sum(1 for node in running if self._role(node) == "slave")
        if len(running) == len(self.nodes) and replicas != wanted:
            return f"{replicas} of {wanted} replicas joined"
        return None
