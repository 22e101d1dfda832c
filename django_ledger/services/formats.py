"""The import and export file formats: JSON Lines and CSV, one record per line."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO, Any

from ..core.importing import FIELDS

__all__ = ["INT_FIELDS", "Row", "read_csv", "read_jsonl"]

#: Fields a CSV cell spells as a whole number.
INT_FIELDS = frozenset(
    {"due_at", "attempts", "fence", "lease_until", "created_at", "updated_at", "priority"}
)


@dataclass(frozen=True)
class Row:
    """One record of an import file, or why its line is not one."""

    line: int
    fields: dict[str, Any] | None
    problem: str | None = None


def read_jsonl(stream: IO[bytes]) -> Iterator[Row]:
    """Read JSON Lines (UTF-8, one object per line; blank lines are skipped)."""
    for number, raw in enumerate(stream, start=1):
        if number == 1 and raw.startswith(b"\xef\xbb\xbf"):
            raw = raw[3:]
        if not raw.strip():
            continue
        try:
            fields = json.loads(raw.decode("utf-8"))
        except UnicodeDecodeError as exc:
            yield Row(number, None, f"not UTF-8 text ({exc.reason} at byte {exc.start})")
            continue
        except json.JSONDecodeError as exc:
            yield Row(number, None, f"not JSON: {exc.msg} at column {exc.colno}")
            continue
        if not isinstance(fields, dict):
            yield Row(number, None, f"a record must be a JSON object, not {type(fields).__name__}")
            continue
        yield Row(number, fields)


def read_csv(stream: IO[bytes]) -> Iterator[Row]:
    """Read CSV with a header of field names; empty cells are left out (payload: "")."""
    # A payload may be up to 512 MiB; csv's default field limit is 128 KiB.
    csv.field_size_limit(max(csv.field_size_limit(), 1 << 30))
    text = io.TextIOWrapper(stream, encoding="utf-8-sig", newline="")
    try:
        yield from _csv_rows(csv.reader(text))
    finally:
        text.detach()  # leave the caller's stream open


def _csv_rows(reader: Any) -> Iterator[Row]:
    try:
        header = next(reader, None)
    except (UnicodeDecodeError, csv.Error) as exc:
        yield Row(1, None, f"unreadable header: {exc}")
        return
    if header is None:
        return
    unknown = [name for name in header if name not in FIELDS]
    if unknown or len(set(header)) != len(header):
        problem = f"unknown column(s): {', '.join(unknown)}" if unknown else "repeated column"
        yield Row(1, None, f"{problem}; columns are: {', '.join(FIELDS)}")
        return
    line = reader.line_num + 1
    while True:
        try:
            cells = next(reader)
        except StopIteration:
            return
        except (UnicodeDecodeError, csv.Error) as exc:
            yield Row(line, None, f"unreadable CSV: {exc}")
            return
        start, line = line, reader.line_num + 1
        if not any(cells):
            continue
        if len(cells) != len(header):
            yield Row(start, None, f"{len(cells)} cells where the header has {len(header)}")
            continue
        yield _csv_row(start, dict(zip(header, cells, strict=True)))


def _csv_row(line: int, cells: dict[str, str]) -> Row:
    fields: dict[str, Any] = {}
    for name, cell in cells.items():
        if cell == "" and name != "payload":
            continue
        if name in INT_FIELDS:
            if not cell.isdecimal():
                return Row(line, None, f"{name} must be a whole number, got {cell!r}")
            fields[name] = int(cell)
        else:
            fields[name] = cell
    return Row(line, fields)
