"""Offline migration: import records verified and gated, export them exactly."""

from __future__ import annotations

import csv
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import IO, Any

from ..core.errors import CorruptRecord, LedgerError
from ..core.importing import FIELDS, prepare_import, record_to_fields
from ..core.ledger import Ledger
from ..core.records import Record, decode_record
from ..core.results import AdmissionStatus
from ..core.sharded import AnyLedger
from .formats import Row

__all__ = [
    "ExportResult",
    "ImportAborted",
    "ImportResult",
    "LineProblem",
    "export_queue",
    "import_lines",
    "read_raw",
]


@dataclass(frozen=True)
class LineProblem:
    """A line that was not imported as given, and why."""

    line: int
    request_id: str | None
    reason: str

    def __str__(self) -> str:
        who = f" ({self.request_id!r})" if self.request_id is not None else ""
        return f"line {self.line}{who}: {self.reason}"


@dataclass
class ImportResult:
    """What an import did (or, with ``dry_run``, would do)."""

    queue: str
    dry_run: bool = False
    lines: int = 0  # records read (blank lines are skipped)
    imported: int = 0  # written now
    duplicates: int = 0  # already there, agreeing on every given field
    verified: int = 0  # read back after the write and found as given
    written_through: int = 0  # last line of the last batch written
    bad_lines: list[LineProblem] = field(default_factory=list)
    conflicts: list[LineProblem] = field(default_factory=list)
    failed: list[LineProblem] = field(default_factory=list)  # FULL, refused, or not read back
    gate: str = "untouched"  # "opened", "kept closed" or "left closed" after a real import

    @property
    def ok(self) -> bool:
        """True when every line agreed with what the queue now holds."""
        return not (self.bad_lines or self.conflicts or self.failed)


class ImportAborted(LedgerError):
    """The import stopped midway (Redis failed, or the gate was opened under it).

    ``result`` says how far it got; running the same import again resumes it.
    """

    def __init__(self, message: str, result: ImportResult) -> None:
        super().__init__(message)
        self.result = result


ProgressCallback = Callable[[ImportResult], None]


@dataclass(frozen=True)
class _Checked:
    """A line validated on its own: the record it makes and the fields it gives."""

    line: int
    record: Record
    given: frozenset[str]


def import_lines(
    ledger: AnyLedger,
    lines: Iterable[Row],
    batch_size: int = 1000,
    dry_run: bool = False,
    keep_gate: bool = False,
    progress: ProgressCallback | None = None,
) -> ImportResult:
    """Import records into ``ledger`` offline, verified, in batches of ``batch_size`` lines.

    The queue's gate is closed first (no claim runs during the import) and opened at
    the end only if every line agreed with what the queue holds, unless ``keep_gate``.
    Each batch is validated whole before any of it is written: a bad line is
    reported with its number, its batch is not written, and the lines after it are
    only validated, so the queue holds an exact prefix of the file. Every written or
    agreeing identity is read back and compared. Lines already imported answer
    ``DUPLICATE``, so re-running a file (after a fix, or an interruption) resumes it.
    ``dry_run`` validates and compares with what the queue holds, writing nothing.
    ``progress`` is called after every line read, with the counts so far.
    """
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive int, got {batch_size!r}")
    result = ImportResult(ledger.queue, dry_run=dry_run)
    try:
        # Closing the gate is a write too: a full or unreachable Redis refuses it here.
        now = ledger.server_time_ms()
        if not dry_run:
            ledger.close_gate()
            result.gate = "left closed"
        _import(ledger, lines, batch_size, result, now, progress)
    except ImportAborted:
        raise
    except LedgerError as exc:
        raise ImportAborted(str(exc), result) from exc
    if not dry_run:
        if result.ok and not keep_gate:
            ledger.open_gate()
            result.gate = "opened"
        elif keep_gate:
            result.gate = "kept closed"
    return result


def _import(
    ledger: AnyLedger,
    lines: Iterable[Row],
    batch_size: int,
    result: ImportResult,
    now: int,
    progress: ProgressCallback | None,
) -> None:
    batch: list[Row] = []
    for row in lines:
        result.lines += 1
        if row.fields is None:
            result.bad_lines.append(LineProblem(row.line, None, row.problem or "unreadable"))
        else:
            batch.append(row)
        if len(batch) >= batch_size:
            _flush(ledger, batch, result, now)
            batch = []
        if progress is not None:
            progress(result)
    if batch:
        _flush(ledger, batch, result, now)


def _flush(ledger: AnyLedger, batch: list[Row], result: ImportResult, now: int) -> None:
    if result.dry_run or result.bad_lines:
        # A dry run, or after a bad line: validate only (the queue keeps an exact prefix).
        checked = _validate(ledger, batch, result, now)
        if result.dry_run:
            _compare(ledger, checked, result)
        return
    try:
        # import_many validates the whole batch before it writes any of it.
        answers = ledger.import_many([row.fields or {} for row in batch])
    except ValueError:
        _validate(ledger, batch, result, now)  # find the bad lines, by number
        return
    check: list[tuple[Row, Record]] = []
    for row, answer in zip(batch, answers, strict=True):
        request_id = answer.request_id
        if answer.status in (AdmissionStatus.ADMITTED, AdmissionStatus.DUPLICATE):
            if answer.status is AdmissionStatus.ADMITTED:
                result.imported += 1
            else:
                result.duplicates += 1
            assert answer.record is not None  # both carry the record the queue holds
            check.append((row, answer.record))
        elif answer.status is AdmissionStatus.CONFLICT:
            result.conflicts.append(LineProblem(row.line, request_id, _why(answer.reason)))
        elif answer.reason == "gate_open":
            result.failed.append(LineProblem(row.line, request_id, "gate_open"))
            result.gate = "opened by someone else"
            raise ImportAborted(
                f"the gate of queue {ledger.queue!r} was opened during the import; "
                f"stopped at line {row.line}",
                result,
            )
        else:
            reason = answer.reason or answer.status.value
            result.failed.append(LineProblem(row.line, request_id, reason))
    result.written_through = batch[-1].line
    _verify(ledger, check, result)


def _validate(
    ledger: AnyLedger, batch: list[Row], result: ImportResult, now: int
) -> list[_Checked]:
    """Validate each line on its own; note the bad ones and return the good ones."""
    checked = []
    for row in batch:
        fields = row.fields or {}
        try:
            record, given = prepare_import(fields, now, ledger.max_payload_bytes)
        except ValueError as exc:
            request_id = fields.get("request_id")
            result.bad_lines.append(
                LineProblem(row.line, request_id if isinstance(request_id, str) else None, str(exc))
            )
        else:
            checked.append(_Checked(row.line, record, given))
    result.bad_lines.sort(key=lambda problem: problem.line)
    return checked


def _verify(ledger: AnyLedger, check: list[tuple[Row, Record]], result: ImportResult) -> None:
    """Read every written or agreeing identity back; it must be the record the import saw."""
    stored = _read(ledger, [record.request_id for _, record in check])
    for (row, expected), found in zip(check, stored, strict=True):
        if found == expected:
            result.verified += 1
            continue
        if isinstance(found, str):
            problem = found
        elif found is None:
            problem = "not found when read back"
        else:
            problem = "read back different from what the import wrote or found"
        result.failed.append(LineProblem(row.line, expected.request_id, problem))


def _compare(ledger: AnyLedger, batch: list[_Checked], result: ImportResult) -> None:
    """Dry run: say what importing the batch would do, from what the queue holds."""
    stored = _read(ledger, [item.record.request_id for item in batch])
    for item, found in zip(batch, stored, strict=True):
        if found is None:
            result.imported += 1
        elif isinstance(found, str):
            result.conflicts.append(LineProblem(item.line, item.record.request_id, found))
        else:
            given = sorted(item.given)
            differs = ",".join(n for n in given if getattr(found, n) != getattr(item.record, n))
            if differs:
                result.conflicts.append(
                    LineProblem(item.line, item.record.request_id, f"differs: {differs}")
                )
            else:
                result.duplicates += 1


def _read(ledger: AnyLedger, ids: list[str]) -> list[Record | str | None]:
    """Read records by id: the record, ``None`` if absent, or why the bytes are corrupt.

    One ``HMGET`` per shard that holds some of ``ids`` (a plain queue: one).
    """
    raws = read_raw(ledger, [(ledger.shard_for(request_id), request_id) for request_id in ids])
    found: list[Record | str | None] = []
    for request_id, raw in zip(ids, raws, strict=True):
        if raw is None:
            found.append(None)
            continue
        try:
            found.append(decode_record(request_id, raw))
        except CorruptRecord as exc:
            found.append(f"stored bytes are corrupt ({exc.reason})")
    return found


def read_raw(ledger: AnyLedger, fields: list[tuple[Ledger, str | bytes]]) -> list[bytes | None]:
    """The stored bytes of (shard, id) pairs, in order: one ``HMGET`` per shard named."""
    groups: dict[Ledger, list[int]] = {}
    for position, (shard, _) in enumerate(fields):
        groups.setdefault(shard, []).append(position)
    raws: list[bytes | None] = [None] * len(fields)
    with ledger.translate_errors():
        for shard, positions in groups.items():
            got = shard.redis.hmget(shard.records_key, [fields[p][1] for p in positions])
            for position, raw in zip(positions, got, strict=True):
                raws[position] = raw
    return raws


def _why(reason: str | None) -> str:
    if reason and reason.startswith("differs:"):
        return "differs: " + reason.removeprefix("differs:")
    return reason or "conflict"


# -- export ---------------------------------------------------------------------------


@dataclass
class ExportResult:
    """What an export wrote, and the ids it could not."""

    queue: str
    records: int = 0
    quarantined: list[str] = field(default_factory=list)
    corrupt: list[str] = field(default_factory=list)


def export_queue(
    ledger: AnyLedger, out: IO[str], fmt: str = "jsonl", count: int = 1000
) -> ExportResult:
    """Write every record of ``ledger`` to ``out`` in the import format.

    Walks the records hash with ``HSCAN`` (every record there for the whole walk is
    written once; stop producers and workers, or close the gate, for an exact
    snapshot), each shard's in turn on a sharded queue. Quarantined ids, and bytes that
    fail their checksum, are listed in the result and skipped: they are not records.
    """
    if fmt not in ("jsonl", "csv"):
        raise ValueError(f"format must be 'jsonl' or 'csv', got {fmt!r}")
    result = ExportResult(ledger.queue)
    writer = csv.writer(out, lineterminator="\n") if fmt == "csv" else None
    if writer is not None:
        writer.writerow(FIELDS)
    for shard in ledger.shards:
        _export_shard(shard, out, writer, count, result)
    return result


def _export_shard(
    shard: Ledger, out: IO[str], writer: Any, count: int, result: ExportResult
) -> None:
    """Write every record of one shard (a plain queue's only one)."""
    seen: set[bytes] = set()
    cursor = 0
    while True:
        with shard.translate_errors():
            cursor, page = shard.redis.hscan(shard.records_key, cursor, count=count)
            # HSCAN may return a field twice (the hash can be rehashed meanwhile).
            items = [(key, raw) for key, raw in page.items() if key not in seen]
            seen.update(key for key, _ in items)
            pipe = shard.redis.pipeline(transaction=False)
            for key, _ in items:
                pipe.hexists(shard.quarantine_key, key)
            quarantined = pipe.execute() if items else []
        for (key, raw), held in zip(items, quarantined, strict=True):
            try:
                request_id = key.decode("utf-8")
            except UnicodeDecodeError:
                result.corrupt.append(repr(key))
                continue
            if held:
                result.quarantined.append(request_id)
                continue
            try:
                record = decode_record(request_id, raw)
            except CorruptRecord:
                result.corrupt.append(request_id)
                continue
            fields = record_to_fields(record)
            if writer is not None:
                writer.writerow(["" if fields[name] is None else fields[name] for name in FIELDS])
            else:
                out.write(json.dumps(fields, ensure_ascii=False, separators=(",", ":")) + "\n")
            result.records += 1
        if int(cursor) == 0:
            return
