"""The base of the ledger's management commands: help texts translated when asked for.

Each command's ``help`` is a lazy translation, so ``--help`` speaks the language active
when the parser is made; argparse formats only ``str``, so the text is resolved then.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

__all__ = ["LedgerCommand"]


class LedgerCommand(BaseCommand):
    """A management command whose help (a lazy translation) argparse can format."""

    def create_parser(self, prog_name: str, subcommand: str, **kwargs: Any) -> CommandParser:
        lazy = self.help
        self.help = str(lazy)
        try:
            return super().create_parser(prog_name, subcommand, **kwargs)
        finally:
            self.help = lazy
