"""The base of the ledger's management commands: help texts translated when asked for.

Each command's ``help`` is a lazy translation, so ``--help`` speaks the language active
when the parser is made; argparse formats only ``str``, so the text is resolved then.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Literal

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils.translation import gettext

from ..checks.base import RUN_TAG

__all__ = ["LedgerCommand", "add_http_arguments", "float_argument", "refused", "signals_handled"]


def float_argument(parser: CommandParser, name: str, default: float | None, help: str) -> None:
    """An option that takes a number (seconds, mostly): ``--interval 0.5``."""
    parser.add_argument(name, type=float, default=default, help=help)


def add_http_arguments(parser: CommandParser, metrics_help: str, default_age: str) -> None:
    """The options of a process's HTTP endpoint: where it listens, its probes' bounds.

    ``--metrics-port`` (its help ``metrics_help``: what the port serves), ``--metrics-address``,
    ``--healthz-max-age`` (its default said by ``default_age``) and ``--readyz-max-outage``.
    """
    parser.add_argument("--metrics-port", type=int, default=None, help=metrics_help)
    parser.add_argument(
        "--metrics-address",
        default=None,
        help=gettext(
            "the address --metrics-port listens on (default 127.0.0.1: this host only; "
            "0.0.0.0 for every interface)"
        ),
    )
    parser.add_argument(
        "--healthz-max-age",
        type=float,
        default=None,
        metavar="SECONDS",
        help=gettext(
            "/healthz fails once the main loop has not turned for this long (default: "
            "%(default_age)s)"
        )
        % {"default_age": default_age},
    )
    parser.add_argument(
        "--readyz-max-outage",
        type=float,
        default=None,
        metavar="SECONDS",
        help=gettext(
            "/readyz fails once Redis has failed every call for this long (default 5); "
            "it fails while stopping too"
        ),
    )


@contextmanager
def refused(*errors: type[Exception]) -> Iterator[None]:
    """Inside the block, ``errors`` become a ``CommandError`` that says the same."""
    try:
        yield
    except errors as exc:
        raise CommandError(str(exc)) from exc


@contextmanager
def signals_handled(handle: Callable[[int, Any], object]) -> Iterator[None]:
    """Handle SIGINT and SIGTERM with ``handle`` inside the block, then as before.

    Signal handlers can be set in the main thread only: in another (a command called
    from a thread) the block runs with the handlers as they are.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.signal(sig, handle) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


class LedgerCommand(BaseCommand):
    """A management command whose help (a lazy translation) argparse can format.

    At start it runs the checks of what it works on (``RUN_TAG``: the ``LEDGER`` and
    ``TASKS`` settings, the schedules, the handlers), not the whole project's: a worker
    has no use for the URL checks, which import every view (0.3 s of CPU a start).
    """

    requires_system_checks: list[str] | tuple[str, ...] | Literal["__all__"] = [RUN_TAG, "tasks"]

    def create_parser(self, prog_name: str, subcommand: str, **kwargs: Any) -> CommandParser:
        lazy = self.help
        self.help = str(lazy)
        try:
            return super().create_parser(prog_name, subcommand, **kwargs)
        finally:
            self.help = lazy
