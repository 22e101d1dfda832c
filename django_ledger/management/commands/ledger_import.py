"""``manage.py ledger_import``: offline migration of records from JSON Lines or CSV."""

from __future__ import annotations

import io
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO, Any

from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import CommandError, CommandParser
from django.utils.translation import gettext, gettext_lazy

from django_ledger.conf import get_ledger
from django_ledger.services import ImportAborted, ImportResult, import_lines, read_csv, read_jsonl

from ..base import LedgerCommand, refused

MAX_BATCH_SIZE = 100_000


class Command(LedgerCommand):
    help = gettext_lazy(
        "Import records into a queue from a JSON Lines or CSV file ('-' for standard "
        "input). Closes the queue's gate, imports in batches, reads every record back, "
        "and opens the gate only when every line agreed. Re-running the same file is "
        "harmless."
    )  # type: ignore[assignment]  # lazy: the language of each run
    # call_command(..., stdin=stream) feeds "-" in tests.
    stealth_options = ("stdin",)

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("path", help=gettext("file to import, or - for standard input"))
        parser.add_argument(
            "--queue", default="default", help=gettext("queue to import into (default: default)")
        )
        parser.add_argument(
            "--format",
            choices=("jsonl", "csv"),
            default=None,
            help=gettext("input format (default: csv for a .csv file, else jsonl)"),
        )
        parser.add_argument(
            "--batch-size",
            type=int,
            default=1000,
            help=(
                gettext(
                    "lines validated, written and read back together, 1 to %(max)s (default 1000)"
                )
                % {"max": MAX_BATCH_SIZE}
            ),
        )
        parser.add_argument(
            "--dry-run",
            action="store_true",
            help=gettext(
                "validate every line and compare with the queue; write nothing, leave the gate "
                "alone"
            ),
        )
        parser.add_argument(
            "--keep-gate",
            action="store_true",
            help=gettext("leave the gate closed even when all went well"),
        )
        parser.add_argument(
            "--progress-every",
            type=int,
            default=10_000,
            help=gettext("report progress on stderr every N lines (0: never; default 10000)"),
        )

    def handle(self, *args: Any, **options: Any) -> None:
        batch_size = options["batch_size"]
        if not 1 <= batch_size <= MAX_BATCH_SIZE:
            raise CommandError(
                gettext("--batch-size must be from 1 to %(max)s, got %(batch_size)s")
                % {"max": MAX_BATCH_SIZE, "batch_size": batch_size}
            )
        with refused(ImproperlyConfigured):
            ledger = get_ledger(options["queue"])
        path = options["path"]
        fmt = options["format"] or ("csv" if path.lower().endswith(".csv") else "jsonl")
        reader = read_csv if fmt == "csv" else read_jsonl
        with self._open(path, options.get("stdin")) as stream:
            try:
                result = import_lines(
                    ledger,
                    reader(stream),
                    batch_size=batch_size,
                    dry_run=options["dry_run"],
                    keep_gate=options["keep_gate"],
                    progress=self._progress(options["progress_every"]),
                )
            except ImportAborted as exc:
                self._summary(exc.result)
                raise CommandError(
                    gettext(
                        "%(exc)s\nThe import stopped; run the same command again to resume (lines "
                        "already imported answer DUPLICATE)."
                    )
                    % {"exc": exc}
                ) from exc
            except KeyboardInterrupt:
                raise CommandError(
                    gettext(
                        "interrupted; the gate of queue %(queue)r stays closed. Run the same command "
                        "again to resume (lines already imported answer DUPLICATE)."
                    )
                    % {"queue": ledger.queue}
                ) from None
        self._summary(result)
        if not result.ok:
            raise CommandError(
                f"{len(result.bad_lines)} bad line(s), {len(result.conflicts)} conflict(s), "
                f"{len(result.failed)} failed; "
                + (
                    "nothing was written."
                    if result.dry_run
                    else f"the gate of queue {ledger.queue!r} is {result.gate}. Fix the file and run "
                    "it again: lines already imported answer DUPLICATE."
                )
            )

    @contextmanager
    def _open(self, path: str, stdin: Any) -> Iterator[IO[bytes]]:
        if path == "-":
            stream = stdin if stdin is not None else sys.stdin.buffer
            stream = getattr(stream, "buffer", stream)
            if isinstance(stream, io.TextIOBase):  # a StringIO given in place of stdin
                stream = io.BytesIO(stream.read().encode("utf-8"))
            yield stream
            return
        try:
            handle = open(path, "rb")  # noqa: SIM115 - closed below
        except OSError as exc:
            raise CommandError(
                gettext("cannot read %(path)s: %(strerror)s")
                % {"path": path, "strerror": exc.strerror}
            ) from exc
        with handle:
            yield handle

    def _progress(self, every: int) -> Any:
        if every <= 0:
            return None

        def report(result: ImportResult) -> None:
            if result.lines % every:
                return
            self.stderr.write(
                gettext(
                    "%(lines)s lines read: %(imported)s imported, %(duplicates)s already present, "
                    "%(count)s conflicts, %(count2)s bad"
                )
                % {
                    "lines": f"{result.lines:,}",
                    "imported": f"{result.imported:,}",
                    "duplicates": f"{result.duplicates:,}",
                    "count": f"{len(result.conflicts):,}",
                    "count2": f"{len(result.bad_lines):,}",
                }
            )

        return report

    def _summary(self, result: ImportResult) -> None:
        for label, problems in (
            (gettext("bad %(problem)s"), result.bad_lines),
            (gettext("conflict %(problem)s"), result.conflicts),
            (gettext("failed %(problem)s"), result.failed),
        ):
            for problem in problems:
                self.stderr.write(label % {"problem": problem}, self.style.ERROR)
        values = {
            "queue": result.queue,
            "lines": result.lines,
            "imported": result.imported,
            "duplicates": result.duplicates,
            "verified": result.verified,
            "count": len(result.conflicts),
            "count2": len(result.bad_lines),
            "count3": len(result.failed),
            "written_through": result.written_through,
            "gate": result.gate,
        }
        if result.dry_run:
            self.stdout.write(
                gettext(
                    "dry run of queue %(queue)s: %(lines)s line(s) read, %(imported)s would be "
                    "imported, %(duplicates)s already present, %(count)s conflict(s), %(count2)s "
                    "bad line(s); nothing written"
                )
                % values
            )
            return
        self.stdout.write(
            gettext(
                "queue %(queue)s: %(lines)s line(s) read, %(imported)s imported, "
                "%(duplicates)s already present, %(verified)s verified, %(count)s conflict(s), "
                "%(count2)s bad line(s), %(count3)s failed; written through line "
                "%(written_through)s; gate %(gate)s"
            )
            % values
        )
