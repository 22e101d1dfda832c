"""The main loop's idle wait: how long it waits, on what, and which queues it skips meanwhile.

An idle worker's waker threads block on the queues' wake keys (``core/wake.py``); the
wait ends with an outcome, a stop, an admission's wake-up, or when the earliest PENDING
record the last claims left falls due. A queue that gave fewer claims than asked for is
quiet until then (or until woken for it): rounds skip it, so an idle worker sends
nothing meanwhile but the blocking calls.
"""

from __future__ import annotations

from ..wake import Waker
from .state import WorkerState

__all__ = ["RETRY_WAIT", "Idle"]

#: How long the loop waits, at most, while settlements wait to be sent again (Redis away).
RETRY_WAIT = 0.5


class Idle:
    """What the main loop knows of when work falls due, and its wait for it."""

    def __init__(self, state: WorkerState) -> None:
        self._burst = state.config.burst
        self.waker = Waker(
            {queue: ledger.wake_keys() for queue, ledger in state.ledgers.items()},
            state.wake,
            state.done,
            state.config.wake_block,
            state.worker_id,
            state.contact,
        )
        self._stopping = state.stopping
        #: When the earliest PENDING record the last claims left falls due (ms; ``None``:
        #: none is, or it is not known), and whether a call of the last round failed.
        self.due_in_ms: int | None = None
        self.failed = False
        #: Queues with nothing due until a monotonic time (inf: until woken for them).
        self.quiet: dict[str, float] = {}

    def wait(self, armed: bool, pending: bool, empty: bool = False) -> None:
        """Wait for an outcome, a stop, a due time or (``armed``) an admission's wake-up.

        Armed, the waker's threads block on the queues' wake keys; the wait ends when the
        earliest PENDING record falls due (``Claims.due_in_ms``). ``pending``: settlements
        wait to be sent, so the wait is at most ``RETRY_WAIT``. ``empty``: nothing is in
        hand, so no outcome can end the wait: the calling thread blocks on the wake keys
        itself when one call covers them (``Waker.wait``).
        """
        due = self.due_in_ms
        if armed and due == 0:
            return  # more is due now than the last call took
        timeout = None if due is None or not armed else due / 1000
        if self.failed or pending or not self.waker.blocks:
            timeout = RETRY_WAIT if timeout is None else min(timeout, RETRY_WAIT)
            empty = False
        self.waker.wait(timeout, armed, empty, self._stopping)

    def note(self, queue: str, due: int | None, short: bool, now: float) -> None:
        """Remember until when ``queue`` has nothing due, so that rounds skip it meanwhile.

        Only a call that got fewer than it asked for knows (a ``Claims`` reply); a wake-up
        popped for the queue ends it sooner. A burst run asks every queue every round.
        """
        if not short or self._burst or not self.waker.blocks or due == 0:
            self.quiet.pop(queue, None)
        elif due is None:
            self.quiet[queue] = float("inf")
        else:
            self.quiet[queue] = now + due / 1000

    def forget(self, queue: str) -> None:
        """A call to ``queue`` failed: what it said of its due times no longer holds."""
        self.quiet.pop(queue, None)
