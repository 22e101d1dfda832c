"""The base of the ledger's management commands: help texts translated when asked for.

Each command's ``help`` is a lazy translation, so ``--help`` speaks the language active
when the parser is made; argparse formats only ``str``, so the text is resolved then.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.core.management.base import BaseCommand, CommandParser
from django.utils.translation import gettext

from ..checks.base import RUN_TAG

__all__ = ["LedgerCommand", "add_probe_arguments"]


def add_probe_arguments(parser: CommandParser, default_age: str) -> None:
    """``--healthz-max-age`` and ``--readyz-max-outage``: the bounds of the HTTP probes."""
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


class LedgerCommand(BaseCommand):
    """A management command whose help (a lazy translation) argparse can format.

    At start it runs the checks of what it works on (``RUN_TAG``: the ``LEDGER`` and
    ``TASKS`` settings, the schedules, the handlers), not the whole project's: a worker
    has no use for the URL checks, which import every view (0.3 s of CPU a start).
    """

    requires_system_checks: Sequence[str] | str = [RUN_TAG, "tasks"]

    def create_parser(self, prog_name: str, subcommand: str, **kwargs: Any) -> CommandParser:
        lazy = self.help
        self.help = str(lazy)
        try:
            return super().create_parser(prog_name, subcommand, **kwargs)
        finally:
            self.help = lazy
