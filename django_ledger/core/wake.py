"""Waking an idle worker: a blocking ``BZPOPMIN`` on the queues' wake keys, not a poll.

Every queue has a wake key (``{ns:queue}:wake``, in the queue's slot): a sorted set of
one member that the scripts set in the same call as a write that makes a record PENDING
(an admission, a give-back, a retry without delay, repair, a sweep that finds due records
nobody claimed, an import, an operator's retry), and that a claim leaving nothing due
deletes. A worker with room and nothing due arms the ``Waker``: its threads block on the
keys with ``BZPOPMIN`` (one call per block time-out, on a connection of the client's own
pool), and the first to pop the member sets the worker's wake event; the worker then
claims. Its main loop waits on that event, so an outcome, a stop or a due time (the
claim's ``Claims.due_in_ms``) ends the wait too, without waiting for the block.

A worker with nothing in hand has no outcome to wait for: when one call covers all its
wake keys (one client; on a cluster, one slot), its main loop blocks on them itself
(``Waker.wait`` with ``empty``) and claims as soon as the call returns, a thread hand-off
sooner. The call also takes the worker's own stop key, which a stop pushes (``nudge``),
so a stop ends that block at once too. A waker thread's call still in flight then (sent
while a job ran) would take the next admission's wake-up first, Redis serving blocked
clients in the order they blocked: the main loop pushes the worker's own hand-back key,
which ends that call at once, and blocks in its place (``Waker.wait``).

``BZPOPMIN`` takes keys of one slot only on a cluster, so there is one thread per slot
(per client on a single server: one for every queue of it), each blocking on its keys
only. A member popped after the worker stopped waiting (it claimed meanwhile, or has no
room) is put back, so another idle worker still wakes for it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import redis as redis_py
from redis.crc import key_slot

from .probes import Contact

__all__ = ["BLOCK_MOST", "Waker", "block_for", "slot_groups"]

log = logging.getLogger("django_ledger.worker")

#: The longest one blocking call waits (seconds): an idle worker sends one per this.
BLOCK_MOST = 1.0


def block_for(client: Any, most: float = BLOCK_MOST) -> float:
    """How long one blocking call on ``client`` may wait: within its ``socket_timeout``.

    redis-py gives up on a reply after ``socket_timeout``: a block must end well before
    (a quarter of a second before, or at half the time-out when that is shorter).
    """
    pool = getattr(client, "connection_pool", None)
    kwargs = getattr(pool, "connection_kwargs", None)
    if kwargs is None:
        kwargs = getattr(getattr(client, "nodes_manager", None), "connection_kwargs", None) or {}
    timeout = kwargs.get("socket_timeout")
    if not timeout:
        return most
    return max(0.001, min(most, float(timeout) - min(0.25, float(timeout) / 2)))


def slot_groups(
    keys: Mapping[str, Sequence[tuple[Any, str]]],
) -> list[tuple[Any, dict[str, str]]]:
    """The keys one blocking call can read: (client, key -> queue) per client and cluster slot."""
    groups: dict[tuple[int, int], tuple[Any, dict[str, str]]] = {}
    for queue, pairs in keys.items():
        for client, key in pairs:
            cluster = isinstance(client, redis_py.RedisCluster)
            slot = int(key_slot(key.encode())) if cluster else -1
            groups.setdefault((id(client), slot), (client, {}))[1][key] = queue
    return list(groups.values())


@dataclass
class _Group:
    """Wake keys one blocking call can take: one client's, and on a cluster one slot's."""

    client: Any
    block: float
    wake_keys: list[str] = field(default_factory=list)
    queues: dict[str, str] = field(default_factory=dict)  # key -> queue


class Waker:
    """Block on the wake keys of a worker's queues while it waits; set ``wake`` on a pop."""

    def __init__(
        self,
        keys: Mapping[str, Sequence[tuple[Any, str]]],
        wake: threading.Event,
        done: threading.Event,
        most: float,
        owner: str,
        contact: Contact,
    ) -> None:
        #: Told whether each blocking call was answered (``/readyz``; ``core/probes.py``).
        self._contact = contact
        self._wake = wake
        self._done = done
        self._cond = threading.Condition()
        self._armed = False
        self._here = False  # the main loop is in (or about to send) its own block
        self._calling = 0  # the threads' blocking calls in flight
        self._empty = False  # the loop waits with nothing in hand: a block may be its own
        self._popped: set[str] = set()
        self._groups = [
            _Group(client, block_for(client, most), list(queues), queues)
            for client, queues in slot_groups(keys)
        ]
        self._threads: list[threading.Thread] = []
        #: The key a stop pushes to end the loop's own block (in the first wake key's slot).
        self.stop_key = f"{self._groups[0].wake_keys[0]}:stop:{owner}" if self._groups else ""
        #: The key the loop pushes to end a waker thread's call and block in its place
        #: (one group only: the loop blocks itself only then).
        self.hand_key = (
            f"{self._groups[0].wake_keys[0]}:hand:{owner}" if len(self._groups) == 1 else ""
        )

    @property
    def blocks(self) -> bool:
        """Whether there is anything to block on (else the worker polls)."""
        return bool(self._groups)

    def start(self) -> None:
        for n, group in enumerate(self._groups):
            thread = threading.Thread(
                target=self._serve, args=(group,), name=f"ledger-waker-{n}", daemon=True
            )
            thread.start()
            self._threads.append(thread)

    def wait(
        self,
        timeout: float | None,
        armed: bool,
        empty: bool = False,
        stopping: threading.Event | None = None,
    ) -> None:
        """Wait for the wake event, at most ``timeout``; ``armed``: an admission ends it.

        The threads are armed only meanwhile: a worker with no room leaves the wake key to
        the others. ``empty``: nothing is in hand, so only an admission, a due time or a
        stop can end the wait: the calling thread blocks on the keys itself
        (``_block_here``) when one call covers them, after ending a thread's call still in
        flight (the hand-back key); if that cannot be sent, a thread's call that ends empty
        hands the wait back, so the next is its own.
        """
        if armed and empty and stopping is not None and len(self._groups) == 1:
            with self._cond:
                calling = bool(self._calling)
            # The hand-back key ends the waker thread's call in flight: once Redis has it,
            # that call holds no place ahead of the loop's own (it popped the key, or pops
            # it as soon as it arrives). The key lives 60 s when nothing pops it (the
            # thread's call had just ended); a later call that pops it goes on. Not sent
            # (Redis away): wait on the event, as before.
            if not calling or self._push(self.hand_key, "hand", "hand-back"):
                with self._cond:
                    self._here = True
                self._block_here(timeout, stopping)
                return
        if armed and self._groups:
            with self._cond:
                self._armed = True
                self._empty = empty
                self._cond.notify_all()
        try:
            self._wake.wait(timeout)
        finally:
            if armed:
                with self._cond:
                    self._armed = self._empty = False

    def _push(self, key: str, member: str, what: str) -> bool:
        """Push ``member`` to ``key``, which lives 60 s unless popped; whether it was sent."""
        client = self._groups[0].client
        try:
            with client.pipeline(transaction=False) as pipe:
                pipe.zadd(key, {member: 0})
                pipe.expire(key, 60)
                pipe.execute()
        except Exception as exc:
            log.debug("%s key not pushed: %s", what, exc)
            return False
        return True

    def _block_here(self, timeout: float | None, stopping: threading.Event) -> None:
        """Block on the wake keys on the calling thread, at most ``timeout`` (or the block).

        Not when the wake event is set already or a stop was asked for (``nudge`` pushes
        the stop key for a stop asked for meanwhile). The caller set ``_here``.
        """
        group = self._groups[0]
        wait = group.block if timeout is None else max(0.001, min(group.block, timeout))
        try:
            if stopping.is_set() or self._wake.is_set():
                return
            try:
                popped = group.client.bzpopmin([*group.wake_keys, self.stop_key], wait)
            except Exception as exc:  # Redis away: the main loop's own calls say so
                log.debug("wake-up wait failed: %s", exc)
                self._contact.failed()
                self._done.wait(wait)
                return
            self._contact.answered()
        finally:
            with self._cond:
                self._here = False
        if popped is None:
            return
        name = popped[0].decode() if isinstance(popped[0], bytes) else str(popped[0])
        if name in group.queues:
            with self._cond:
                self._popped.add(group.queues[name])

    def nudge(self) -> None:
        """A stop: end the main loop's own block, if it is in one, by its stop key."""
        with self._cond:
            if not self._here:
                return
        self._push(self.stop_key, "stop", "stop")  # not popped (the block ended first): gone

    def take_popped(self) -> set[str]:
        """The queues whose wake key this worker popped since it last asked."""
        with self._cond:
            popped, self._popped = self._popped, set()
        return popped

    def _serve(self, group: _Group) -> None:
        """One thread's loop: while armed, one ``BZPOPMIN`` per block time-out."""
        while not self._done.is_set():
            with self._cond:
                while not self._armed and not self._done.is_set():
                    self._cond.wait(group.block)
                if self._done.is_set():
                    return
                self._calling += 1
            keys = [*group.wake_keys, self.hand_key] if self.hand_key else group.wake_keys
            try:
                popped = group.client.bzpopmin(keys, group.block)
                self._contact.answered()
            except Exception as exc:  # Redis away: the main loop's own calls say so
                log.debug("wake-up wait failed: %s", exc)
                self._contact.failed()
                self._done.wait(group.block)
                continue
            finally:
                with self._cond:
                    self._calling -= 1
            if popped is None:
                with self._cond:
                    handing = self._armed and self._empty and len(self._groups) == 1
                    if handing:
                        self._armed = self._empty = False
                if handing:  # the loop, with nothing in hand, blocks itself from now on
                    self._wake.set()
                continue
            key, member, score = popped
            name = key.decode() if isinstance(key, bytes) else str(key)
            if name == self.hand_key:  # the loop blocks in this call's place now
                continue
            with self._cond:
                woken = self._armed
                if woken:
                    self._armed = False  # one wake per wait: the loop claims, then waits again
                    self._popped.add(group.queues.get(name, name))
            if woken:
                self._wake.set()
                continue
            try:  # popped for nothing: leave it to another idle worker
                group.client.zadd(name, {member: score})
            except Exception as exc:
                log.debug("wake-up marker not put back: %s", exc)
