"""A worker's health, seen from outside: is its main loop turning?

systemd: under ``Type=notify`` (``$NOTIFY_SOCKET``) the worker says ``READY=1``, and with
``WatchdogSec=`` (``$WATCHDOG_USEC``) ``WATCHDOG=1`` every half period, only while its
loop turned within the period: a loop that stands still is restarted by systemd.

The main loop notes each turn (``WorkerState.loop_at``) and every heartbeat carries it
(``WorkerInfo.loop_at``); a beat while the loop runs a task itself counts as a turn, the
renewals of that task holding. The renewer beats from a thread of its own, so a loop
stuck in a call keeps beating: ``loop_at`` then falls behind ``beat_at``, and
``manage.py ledger_status --worker ID --max-age S`` says so (``loop_age_s``). Over HTTP,
``/healthz`` and ``/readyz`` on the metrics address say it too (``core/probes.py``).
"""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Callable, Mapping

from ..probes import STALL_FILE_ENV, stall_for_tests
from .heartbeat import WorkerInfo

__all__ = ["STALL_FILE_ENV", "loop_age_s", "notify_systemd", "stall_for_tests"]


def loop_age_s(info: WorkerInfo, now_ms: int) -> float:
    """Seconds since the worker's loop last turned, as its last heartbeat and ``now`` say.

    The older of the heartbeat and the loop's turn: a worker that stopped beating is as
    stale as one whose loop stopped turning. A heartbeat of a version without
    ``loop_at`` is judged by its beat alone.
    """
    turned = info.loop_at or info.beat_at
    return max(0, now_ms - min(turned, info.beat_at)) / 1000


def _send(address: str, message: str) -> None:
    """One datagram to systemd's notification socket (``@name``: the abstract namespace)."""
    target = "\0" + address[1:] if address.startswith("@") else address
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
            sock.sendto(message.encode(), target)
    except OSError:
        pass  # systemd gone or not listening: nothing to tell


def notify_systemd(
    loop_age: Callable[[], float], env: Mapping[str, str] = os.environ
) -> threading.Event:
    """Tell systemd the worker is ready, then feed its watchdog while the loop turns.

    Returns the event that ends the feeding; with no ``$NOTIFY_SOCKET`` it does nothing.
    """
    done = threading.Event()
    address = env.get("NOTIFY_SOCKET", "")
    if not address:
        return done
    _send(address, "READY=1")
    usec = env.get("WATCHDOG_USEC", "")
    if not usec.isdecimal() or int(usec) <= 0:
        return done
    period = int(usec) / 1_000_000

    def feed() -> None:
        while not done.wait(period / 2):
            if loop_age() < period:
                _send(address, "WATCHDOG=1")

    threading.Thread(target=feed, name="ledger-watchdog", daemon=True).start()
    return done
