"""What a running task reports of itself: progress and metadata, fenced and coalesced.

A task reports as often as it likes (``ProgressPad.set_progress``, ``set_metadata``): a
call only notes the value in memory. What is noted goes to Redis at most once per
``interval`` per task, all running tasks of a queue in one script call
(``ProgressBoard.flush_due``, beaten beside repair by the worker: ``ProgressBoard.room``),
and the last value once more when the attempt ends, before its settlement is sent
(``ProgressPad.flush``), so the final value is never lost.

Each write is fenced (``lua/scripts/progress.lua``): it lands only while the record is
CLAIMED under the writer's fence and its lease runs, so a stale run (its claim lost,
repaired, cancelled or settled) never overwrites what a newer one reported. The
document lives in the queue's ``progress`` hash under the request id, and goes with the
record (every purge, ``indexes.lua``'s ``forget``). Its encoding is in
``docs/encoding.md``. Progress is an extra of the job system: the fused path only.
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .errors import LedgerError
from .jobs import nesting_depth
from .ledger_base import LedgerBase
from .transport import text_of

__all__ = [
    "DEFAULT_INTERVAL",
    "MAX_METADATA_BYTES",
    "MAX_NOTE_CHARS",
    "Progress",
    "ProgressBoard",
    "ProgressPad",
    "board",
    "decode_progress",
    "encode_metadata",
    "read_progress",
    "write_progress",
]

#: Seconds between two writes of one task's progress, by default.
DEFAULT_INTERVAL = 1.0
#: The most characters of a progress note.
MAX_NOTE_CHARS = 200
#: The most bytes (UTF-8, as stored: compact JSON) of a task's metadata.
MAX_METADATA_BYTES = 4096
PROGRESS_VERSION = 1
#: How deep metadata may nest (arrays and objects, its own object counting one).
_MAX_DEPTH = 16


@dataclass(frozen=True)
class Progress:
    """What a task last reported: ``done`` of ``total`` (``None``: unknown), a note, metadata.

    ``fence`` is the claim that wrote it (compare with the record's fence: an earlier
    attempt's report when they differ); ``at`` when it was written, epoch ms by the
    Redis clock.
    """

    done: float = 0
    total: float | None = None
    note: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)
    fence: int = 0
    at: int = 0

    @property
    def fraction(self) -> float | None:
        """``done / total`` held to 0..1, or ``None`` while the total is unknown (or 0)."""
        if not self.total:
            return None
        return max(0.0, min(1.0, self.done / self.total))

    @property
    def percent(self) -> int | None:
        """The fraction as a whole percentage (rounded down), or ``None``."""
        fraction = self.fraction
        return None if fraction is None else int(fraction * 100)

    def as_dict(self) -> dict[str, Any]:
        """The plain form readers show (the REST result, the admin)."""
        return {
            "done": self.done,
            "total": self.total,
            "note": self.note,
            "fraction": self.fraction,
            "fence": self.fence,
            "at": self.at,
        }


def _number(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{name} must be a number, not {type(value).__name__}")
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{name} must be a finite number of at least 0, got {value!r}")
    return value


def check_progress(done: object, total: object, note: object) -> tuple[float, float | None, str]:
    """Check one report; ``TypeError``/``ValueError`` saying what is wrong, nothing noted."""
    checked_done = _number("done", done)
    checked_total = None if total is None else _number("total", total)
    if not isinstance(note, str):
        raise TypeError(f"note must be a str, not {type(note).__name__}")
    if len(note) > MAX_NOTE_CHARS:
        raise ValueError(f"note is {len(note)} characters, more than {MAX_NOTE_CHARS}")
    try:
        note.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError(f"note is not valid text: {exc.reason}") from None
    return checked_done, checked_total, note


def encode_metadata(metadata: object) -> str:
    """Encode metadata (a dict of JSON values, str keys) compactly, or raise saying why.

    At most ``MAX_METADATA_BYTES`` bytes of UTF-8 and 16 levels deep: ``ValueError``
    past either, ``TypeError`` for what JSON cannot hold.
    """
    if not isinstance(metadata, Mapping):
        raise TypeError(f"metadata must be a dict, not {type(metadata).__name__}")
    for key in metadata:
        if not isinstance(key, str):
            raise TypeError(f"metadata keys must be str, not {type(key).__name__}")
    try:
        text = json.dumps(
            dict(metadata), ensure_ascii=False, separators=(",", ":"), allow_nan=False
        )
        size = len(text.encode("utf-8"))
    except RecursionError:
        raise ValueError("metadata refers to itself or nests too deep") from None
    except (TypeError, ValueError, UnicodeEncodeError) as exc:
        raise type(exc)(f"metadata cannot be stored as JSON: {exc}") from None
    if size > MAX_METADATA_BYTES:
        raise ValueError(f"metadata is {size:,} bytes as JSON, more than {MAX_METADATA_BYTES:,}")
    deepest = nesting_depth(text, _MAX_DEPTH)  # brackets inside strings do not count
    if deepest > _MAX_DEPTH:
        raise ValueError(f"metadata nests deeper than {_MAX_DEPTH} levels")
    return text


def _document(done: float, total: float | None, note: str, metadata: str) -> str:
    head = json.dumps(
        {"v": PROGRESS_VERSION, "done": done, "total": total, "note": note},
        ensure_ascii=False,
        separators=(",", ":"),
    )
    return f'{head[:-1]},"metadata":{metadata}}}'


def decode_progress(raw: bytes | str | None) -> Progress | None:
    """Read a stored progress document; ``None`` for none, or one this version cannot read."""
    if raw is None:
        return None
    try:
        doc = json.loads(raw)
        if not isinstance(doc, dict) or doc.get("v") != PROGRESS_VERSION:
            return None
        metadata = doc.get("metadata") or {}
        total = doc.get("total")
        return Progress(
            done=doc["done"],
            total=total,
            note=str(doc.get("note", "")),
            metadata=metadata if isinstance(metadata, dict) else {},
            fence=int(doc["fence"]),
            at=int(doc["at"]),
        )
    except (ValueError, KeyError, TypeError, RecursionError):
        return None


def write_progress(
    ledger: LedgerBase, items: Sequence[tuple[str, int, str]]
) -> list[tuple[bool, str]]:
    """Store ``(request_id, fence, document)`` items of one queue shard in one script call.

    Answers per item whether it was written, or the reason it was refused (``superseded``:
    a newer claim holds the record; ``not_claimed``, ``lease_expired``, ``missing``,
    ``corrupt``).
    """
    ledger.fused_only("progress")
    if not items:
        return []
    runner = ledger.runner
    args: list[object] = []
    for request_id, fence, document in items:
        args += [request_id, fence, document]
    reply = runner.run(runner.scripts.progress, args)
    return [(int(reply[i]) == 1, text_of(reply[i + 1])) for i in range(0, len(reply), 2)]


def read_progress(ledger: Any, request_ids: Iterable[str]) -> list[Progress | None]:
    """The progress stored for each id (a sharded queue: each id's shard), in input order."""
    ids = list(request_ids)
    if not ids:
        return []
    with ledger.translate_errors():
        pipe = ledger.redis.pipeline(transaction=False)
        for request_id in ids:
            pipe.hget(ledger.shard_for(request_id).runner.keys.progress, request_id)
        return [decode_progress(raw) for raw in pipe.execute()]


class ProgressPad:
    """One attempt's reports, noted in memory and written coalesced (see the module).

    ``ledger`` is the shard that holds the record. Safe to use from the task's thread and
    the board's at once.
    """

    def __init__(self, ledger: LedgerBase, request_id: str, fence: int, interval: float) -> None:
        self.ledger = ledger
        self.request_id = request_id
        self.fence = fence
        self.interval = interval
        self._lock = threading.Lock()
        #: Held from taking an item to its answer: one pad's writes never cross, so the
        #: board's beat cannot land an older value after the attempt's last one.
        self.sending = threading.Lock()
        self._progress: tuple[float, float | None, str] = (0, None, "")
        self._metadata = "{}"
        self._dirty = False
        self._sent_at = float("-inf")
        #: Why the last write was refused ('' while none was): a stale run's reports stop.
        self.refused = ""
        #: How many writes reached Redis (for tests and logs).
        self.writes = 0

    def set_progress(self, done: float, total: float | None = None, note: str = "") -> None:
        """Note ``done`` of ``total`` with a note; checked now, written coalesced."""
        checked = check_progress(done, total, note)
        self.ledger.fused_only("progress")
        with self._lock:
            if checked != self._progress:
                self._progress, self._dirty = checked, True

    def set_metadata(self, metadata: Mapping[str, Any]) -> None:
        """Note the task's whole metadata; checked now (size, JSON), written coalesced."""
        text = encode_metadata(metadata)
        self.ledger.fused_only("progress")
        with self._lock:
            if text != self._metadata:
                self._metadata, self._dirty = text, True

    def take(self, now: float | None = None) -> tuple[str, int, str] | None:
        """The item to write now, if something changed and the interval has passed.

        ``now=None`` takes it whatever the interval (the attempt's last write).
        """
        with self._lock:
            if not self._dirty or self.refused:
                return None
            if now is not None and now - self._sent_at < self.interval:
                return None
            self._dirty = False
            self._sent_at = time.monotonic() if now is None else now
            done, total, note = self._progress
            return self.request_id, self.fence, _document(done, total, note, self._metadata)

    def unsent(self) -> None:
        """The last item taken never reached Redis: send it again at the next chance."""
        with self._lock:
            self._dirty, self._sent_at = True, float("-inf")

    def answered(self, written: bool, reason: str) -> None:
        """Note the script's answer to this pad's write."""
        with self._lock:
            if written:
                self.writes += 1
            else:
                self.refused = reason or "refused"

    def load_metadata(self) -> dict[str, Any]:
        """The metadata stored for this task (by an earlier attempt too), now the pad's own."""
        with self.ledger.translate_errors():
            raw = self.ledger.redis.hget(self.ledger.runner.keys.progress, self.request_id)
        stored = decode_progress(raw)
        metadata = stored.metadata if stored is not None else {}
        with self._lock:
            if not self._dirty:
                self._metadata = encode_metadata(metadata)
        return dict(metadata)

    def flush(self) -> bool:
        """Write what is noted and not yet written, now (the attempt's end); ``True`` if sent.

        Redis being away is left to the caller (``LedgerError``).
        """
        with self.sending:
            item = self.take()
            if item is None:
                return False
            try:
                ((written, reason),) = write_progress(self.ledger, [item])
            except LedgerError:
                self.unsent()
                raise
            self.answered(written, reason)
            return True


class ProgressBoard:
    """The pads of the running attempts of a process, flushed together on a beat."""

    def __init__(self, interval: float = DEFAULT_INTERVAL) -> None:
        self._lock = threading.Lock()
        self._pads: dict[int, ProgressPad] = {}
        #: Seconds between two writes of one attempt's reports (``room`` sets it).
        self.interval = interval

    def add(self, pad: ProgressPad) -> None:
        with self._lock:
            self._pads[id(pad)] = pad

    def discard(self, pad: ProgressPad) -> None:
        with self._lock:
            self._pads.pop(id(pad), None)

    def flush_due(self, now: float | None = None) -> int:
        """Write each pad's change whose interval has passed: one call per queue shard.

        Returns how many items were sent.
        """
        moment = time.monotonic() if now is None else now
        with self._lock:
            pads = list(self._pads.values())
        by_ledger: dict[int, tuple[LedgerBase, list[tuple[ProgressPad, tuple[str, int, str]]]]] = {}
        held: list[ProgressPad] = []
        try:
            for pad in pads:
                if not pad.sending.acquire(blocking=False):
                    continue  # its attempt is writing its last value: nothing older after it
                held.append(pad)
                item = pad.take(moment)
                if item is not None:
                    by_ledger.setdefault(id(pad.ledger), (pad.ledger, []))[1].append((pad, item))
            sent, failure = 0, None
            for ledger, group in by_ledger.values():
                try:
                    answers = write_progress(ledger, [item for _, item in group])
                except LedgerError as exc:
                    for pad, _ in group:  # Redis away: noted again, for the next beat
                        pad.unsent()
                    failure = failure or exc
                    continue
                for (pad, _), (written, reason) in zip(group, answers, strict=True):
                    pad.answered(written, reason)
                sent += len(group)
            if failure is not None:
                raise failure  # the room's beat logs it; the other queues were written
            return sent
        finally:
            for pad in held:
                pad.sending.release()

    def room(self, interval: float = DEFAULT_INTERVAL) -> ProgressRoom:
        """The worker's room that flushes this board every ``interval`` seconds."""
        if isinstance(interval, bool) or not isinstance(interval, int | float):
            raise TypeError(f"interval must be a number of seconds, not {type(interval).__name__}")
        if not 0.05 <= interval <= 60:
            raise ValueError(f"interval must be from 0.05 to 60 seconds, got {interval!r}")
        self.interval = float(interval)
        return ProgressRoom(self, self.interval)

    def pad(self, ledger: Any, request_id: str, fence: int) -> ProgressPad:
        """A new pad for the attempt of ``request_id`` under ``fence``, on this board."""
        pad = ProgressPad(ledger.shard_for(request_id), request_id, fence, self.interval)
        self.add(pad)
        return pad


class ProgressRoom:
    """``worker.rooms.Room``: a beat flushes the board's due pads."""

    name = "progress"

    def __init__(self, board: ProgressBoard, interval: float) -> None:
        self.board = board
        self.interval = interval

    def beat(self) -> float:
        self.board.flush_due()
        return self.interval

    def close(self) -> None:
        pass


#: The process's board: every attempt's pad is on it while the attempt runs.
board = ProgressBoard()
