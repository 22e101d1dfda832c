"""``manage.py ledger_import``: offline migration of records from JSON Lines or CSV."""

from __future__ import annotations

import io
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO, Any

from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import BaseCommand, CommandError, CommandParser

from django_ledger.conf import get_ledger
from django_ledger.services import ImportAborted, ImportResult, import_lines, read_csv, read_jsonl

MAX_BATCH_SIZE = 100_000


class Command(BaseCommand):
    help = (
        "Import records into a queue from a JSON Lines or CSV file ('-' for standard input). "
        "Closes the queue's gate, imports in batches, reads every record back, and opens the "
        "gate only when every line agreed. Re-running the same file is harmless."
    )
    # call_command(..., stdin=stream) feeds "-" in tests.
    stealth_options = ("stdin",)

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("path", help="file to import, or - for standard input")
        parser.add_argument(
            "--queue", default="default", help="queue to import into (default: default)"
        )
        parser.add_argument(
            "--format",
            choices=("jsonl", "csv"),
            default=None,
            help="input format (default: csv for a .csv file, else jsonl)",
        )
        parser.add_argument(
            "--batch-size",
            type=int,
            default=1000,
            help=f"lines validated, written and read back together, 1 to {MAX_BATCH_SIZE} (default 1000)",
        )
        parser.add_argument(
            "--dry-run",
            action="store_true",
            help="validate every line and compare with the queue; write nothing, leave the gate alone",
        )
        parser.add_argument(
            "--keep-gate", action="store_true", help="leave the gate closed even when all went well"
        )
        parser.add_argument(
            "--progress-every",
            type=int,
            default=10_000,
            help="report progress on stderr every N lines (0: never; default 10000)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        batch_size = options["batch_size"]
        if not 1 <= batch_size <= MAX_BATCH_SIZE:
            raise CommandError(f"--batch-size must be from 1 to {MAX_BATCH_SIZE}, got {batch_size}")
        try:
            ledger = get_ledger(options["queue"])
        except ImproperlyConfigured as exc:
            raise CommandError(str(exc)) from exc
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
                    f"{exc}\nThe import stopped; run the same command again to resume "
                    "(lines already imported answer DUPLICATE)."
                ) from exc
            except KeyboardInterrupt:
                raise CommandError(
                    f"interrupted; the gate of queue {ledger.queue!r} stays closed. Run the same "
                    "command again to resume (lines already imported answer DUPLICATE)."
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
            raise CommandError(f"cannot read {path}: {exc.strerror}") from exc
        with handle:
            yield handle

    def _progress(self, every: int) -> Any:
        if every <= 0:
            return None

        def report(result: ImportResult) -> None:
            if result.lines % every:
                return
            self.stderr.write(
                f"{result.lines:,} lines read: {result.imported:,} imported, "
                f"{result.duplicates:,} already present, {len(result.conflicts):,} conflicts, "
                f"{len(result.bad_lines):,} bad"
            )

        return report

    def _summary(self, result: ImportResult) -> None:
        for problem in result.bad_lines:
            self.stderr.write(f"bad {problem}", self.style.ERROR)
        for problem in result.conflicts:
            self.stderr.write(f"conflict {problem}", self.style.ERROR)
        for problem in result.failed:
            self.stderr.write(f"failed {problem}", self.style.ERROR)
        if result.dry_run:
            self.stdout.write(
                f"dry run of queue {result.queue}: {result.lines} line(s) read, "
                f"{result.imported} would be imported, {result.duplicates} already present, "
                f"{len(result.conflicts)} conflict(s), {len(result.bad_lines)} bad line(s); "
                "nothing written"
            )
            return
        self.stdout.write(
            f"queue {result.queue}: {result.lines} line(s) read, {result.imported} imported, "
            f"{result.duplicates} already present, {result.verified} verified, "
            f"{len(result.conflicts)} conflict(s), {len(result.bad_lines)} bad line(s), "
            f"{len(result.failed)} failed; written through line {result.written_through}; "
            f"gate {result.gate}"
        )
