"""``manage.py ledger_export``: write a queue's records in the import format."""

from __future__ import annotations

from typing import IO, Any, cast

from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import CommandError, CommandParser
from django.utils.translation import gettext, gettext_lazy

from django_ledger.conf import get_ledger
from django_ledger.core.errors import LedgerError
from django_ledger.services import ExportResult, export_queue

from ..base import LedgerCommand, refused


class Command(LedgerCommand):
    help = gettext_lazy(
        "Write every record of a queue, every field, as JSON Lines (or CSV), so that "
        "ledger_import reproduces the queue exactly. Quarantined and corrupt ids are "
        "listed on stderr and skipped."
    )  # type: ignore[assignment]  # lazy: the language of each run

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--queue", default="default", help=gettext("queue to export (default: default)")
        )
        parser.add_argument(
            "-o",
            "--output",
            default="-",
            help=gettext("file to write (default: - for standard output)"),
        )
        parser.add_argument(
            "--format",
            choices=("jsonl", "csv"),
            default=None,
            help=gettext("output format (default: csv for a .csv file, else jsonl)"),
        )

    def handle(self, *args: Any, **options: Any) -> None:
        with refused(ImproperlyConfigured):
            ledger = get_ledger(options["queue"])
        output = options["output"]
        fmt = options["format"] or ("csv" if output.lower().endswith(".csv") else "jsonl")
        try:
            if output == "-":
                # The data unstyled and as given (OutputWrapper would style it on a terminal).
                stdout = cast("IO[str]", getattr(self.stdout, "_out", self.stdout))
                result = export_queue(ledger, stdout, fmt)
            else:
                try:
                    handle = open(output, "w", encoding="utf-8", newline="")  # noqa: SIM115
                except OSError as exc:
                    raise CommandError(
                        gettext("cannot write %(output)s: %(strerror)s")
                        % {"output": output, "strerror": exc.strerror}
                    ) from exc
                with handle:
                    result = export_queue(ledger, handle, fmt)
        except LedgerError as exc:
            raise CommandError(
                gettext("export of queue %(queue)r failed: %(exc)s")
                % {"queue": ledger.queue, "exc": exc}
            ) from exc
        self._summary(result, output)
        if result.corrupt:
            raise CommandError(
                gettext(
                    "%(count)s record(s) failed their checksum and were not exported; run "
                    "ledger_repair to quarantine them"
                )
                % {"count": len(result.corrupt)}
            )

    def _summary(self, result: ExportResult, output: str) -> None:
        where = "standard output" if output == "-" else output
        self.stderr.write(
            gettext("exported %(records)s record(s) of queue %(queue)s to %(where)s")
            % {"records": result.records, "queue": result.queue, "where": where}
        )
        if result.quarantined:
            self.stderr.write(
                f"skipped {len(result.quarantined)} quarantined id(s): "
                + ", ".join(map(repr, result.quarantined))
            )
        if result.corrupt:
            self.stderr.write(
                f"skipped {len(result.corrupt)} corrupt id(s): "
                + ", ".join(map(repr, result.corrupt)),
                self.style.ERROR,
            )
