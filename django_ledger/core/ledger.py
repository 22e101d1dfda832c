"""The delivery ledger: every operation of the contract, on one Redis queue.

``Ledger`` is the facade: it checks arguments, cuts transport batches and hands each
batch to one of two paths over the queue's ``Runner``: ``optimized=True`` runs the fused
scripts (``fused.py``, a whole batch per script call), ``optimized=False`` the reference
path (``reference.py``), built on the generic compare-and-set script. Both give the same
answers; a differential test holds them to it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import timedelta
from typing import Any

from . import fused, reference
from .answers import REPAIR_FIELDS
from .arguments import (
    SettleItem,
    Work,
    check_claim,
    check_name,
    check_priority,
    positive_int,
    settle_work,
    work_size,
)
from .layout import check_layout
from .records import (
    Record,
    State,
    decode_record,
    encode_record,
    id_problem,
    owner_problem,
    traceparent_problem,
)
from .results import (
    Admission,
    AdmissionStatus,
    Claim,
    RepairReport,
    Settlement,
    SettlementStatus,
    Stats,
)
from .runner import Runner
from .scripts import Scripts
from .timing import duration_ms
from .transport import (
    MAX_BATCH,
    MAX_BATCH_BYTES,
    Translate,
    batches,
    decodes_responses,
    scanned_id,
    utf8_len,
)

__all__ = ["MAX_BATCH", "MAX_BATCH_BYTES", "Ledger"]


class Ledger:
    """One queue's ledger on a redis-py client (``Redis`` or ``RedisCluster``)."""

    def __init__(
        self,
        redis: Any,
        namespace: str,
        queue: str,
        max_payload_bytes: int = 1_048_576,
        max_records: int = 100_000,
        optimized: bool = True,
        max_attempts: int = 16,
        retention: timedelta | float = timedelta(days=7),
        max_retained: int = 100_000,
        durability_replicas: int = 0,
        durability_timeout_ms: int = 1000,
    ) -> None:
        self.namespace = check_name(namespace, "namespace")
        self.queue = check_name(queue, "queue")
        self.max_payload_bytes = positive_int(
            max_payload_bytes, "max_payload_bytes", upper=512 * 1024 * 1024
        )
        self.max_records = positive_int(max_records, "max_records")
        self.max_attempts = positive_int(max_attempts, "max_attempts")
        self.max_retained = positive_int(max_retained, "max_retained")
        if not isinstance(optimized, bool):
            raise TypeError("optimized must be a bool")
        self.optimized = optimized
        self.retention_ms = duration_ms(retention, "retention")
        if decodes_responses(redis):
            raise ValueError(
                "the ledger needs a redis client with decode_responses=False: "
                "it verifies the exact stored bytes"
            )
        self.redis = redis
        # Durability: after each write, WAIT until this many replicas have it (0: no WAIT).
        if isinstance(durability_replicas, bool) or not isinstance(durability_replicas, int):
            raise TypeError("durability_replicas must be an int")
        if not 0 <= durability_replicas <= 100:
            raise ValueError(f"durability_replicas must be 0 to 100, got {durability_replicas}")
        self.durability_replicas = durability_replicas
        self.durability_timeout_ms = positive_int(
            durability_timeout_ms, "durability_timeout_ms", upper=3_600_000
        )
        self.runner = Runner(
            redis,
            namespace,
            queue,
            repr(self),
            durability_replicas=durability_replicas,
            durability_timeout_ms=self.durability_timeout_ms,
        )

    def __repr__(self) -> str:
        mode = "optimized" if self.optimized else "reference"
        return f"<Ledger {self.namespace}:{self.queue} {mode}>"

    # -- keys ---------------------------------------------------------------------

    @property
    def records_key(self) -> str:
        return self.runner.records_key

    @property
    def ready_key(self) -> str:
        return self.runner.ready_key

    @property
    def leases_key(self) -> str:
        return self.runner.leases_key

    @property
    def gate_key(self) -> str:
        return self.runner.gate_key

    @property
    def quarantine_key(self) -> str:
        return self.runner.quarantine_key

    @property
    def fences_key(self) -> str:
        """The queue-wide fence counter: every claim's fence comes from it."""
        return self.runner.fences_key

    @property
    def results_key(self) -> str:
        """Results stored with settlements (``settle(..., result=)``), by request id."""
        return self.runner.results_key

    @property
    def terminal_keys(self) -> dict[State, str]:
        """The indexes of terminal records, scored by when they ended."""
        return self.runner.terminal_keys

    @property
    def keys(self) -> tuple[str, ...]:
        """Every key of this queue, in the order the scripts take them."""
        return self.runner.keys

    @property
    def retention(self) -> timedelta:
        return timedelta(milliseconds=self.retention_ms)

    # -- shards (one here; ``ShardedLedger`` has several) ---------------------------

    @property
    def shards(self) -> tuple[Ledger, ...]:
        """The one-shard ledgers this queue is made of: this ledger alone."""
        return (self,)

    def shard_for(self, request_id: str) -> Ledger:
        """The one-shard ledger that holds ``request_id``: this one."""
        return self

    def check_layout(self) -> None:
        """Refuse to run on a queue laid out in another number of shards (``LedgerError``).

        One ``GET`` (see ``layout.check_layout``); callers run it once per process.
        """
        check_layout(self.runner, self.namespace, self.queue, 1)

    def layout_checked_already(self) -> None:
        """Say the stored layout was checked by the caller (``get_ledger``, once a process).

        Nothing to skip here: a ledger of one shard checks only when asked.
        """

    # -- plumbing (the runner's, here for operator code and tests) -----------------

    @property
    def scripts(self) -> Scripts:
        return self.runner.scripts

    @property
    def clock_skew_ms(self) -> int:
        """Test seam: milliseconds added to the Redis server clock inside every script."""
        return self.runner.clock_skew_ms

    @clock_skew_ms.setter
    def clock_skew_ms(self, value: int) -> None:
        self.runner.clock_skew_ms = value

    def run(self, script: Any, args: Sequence[Any]) -> Any:
        """Run one of this queue's scripts, with errors in the ledger's terms."""
        return self.runner.run(script, args)

    def translate_errors(self) -> Translate:
        return self.runner.translate_errors()

    def server_time_ms(self) -> int:
        """Return the Redis server's clock (plus the test skew) in epoch milliseconds."""
        return self.runner.server_time_ms()

    # -- admission ----------------------------------------------------------------

    def admit(
        self,
        request_id: str,
        payload: str,
        delay: timedelta | float = 0,
        traceparent: str | None = None,
        priority: int = 0,
    ) -> Admission:
        """Admit one request, once by its id.

        ``priority`` (-100 to 100, default 0): among records due now, a higher one is
        claimed first; equal priorities in due order.
        """
        if not self.optimized or traceparent is not None:
            return self.admit_many([(request_id, payload)], delay, traceparent, priority)[0]
        # admit_many's steps for one request and no traceparent: no lists, no batching.
        delay_ms = duration_ms(delay, "delay")
        check_priority(priority)
        problem, data = self._checked_request(request_id, payload, None)
        if problem is not None:
            return Admission(request_id, AdmissionStatus.REJECTED, problem)
        batch = [(0, request_id, data)]
        return fused.admit(self.runner, batch, delay_ms, "", self.max_records, priority)[0]

    def _checked_request(
        self, request_id: object, payload: object, trace_problem: str | None
    ) -> tuple[str | None, bytes]:
        """Return why one request is refused (``None``: it is not) and its payload's bytes."""
        problem = id_problem(request_id) or trace_problem
        if not isinstance(payload, str):
            raise TypeError(f"payload must be a str, not {type(payload).__name__}")
        if problem is not None:
            return problem, b""
        try:
            data = payload.encode("utf-8")
        except UnicodeEncodeError:
            return "payload_not_utf8", b""
        if len(data) > self.max_payload_bytes:
            return "payload_too_large", b""
        return None, data

    def admit_many(
        self,
        requests: Iterable[tuple[str, str]],
        delay: timedelta | float = 0,
        traceparent: str | None = None,
        priority: int = 0,
    ) -> list[Admission]:
        """Admit requests in transport batches; results come in input order.

        Not all-or-nothing: if the call is interrupted, any prefix may be stored, and
        calling again with the same requests reconciles (``DUPLICATE`` for those).
        """
        delay_ms = duration_ms(delay, "delay")
        check_priority(priority)
        trace_problem = traceparent_problem(traceparent)
        results: list[Admission | None] = []
        ready: list[tuple[int, str, bytes]] = []
        for item in requests:
            if not isinstance(item, tuple | list) or len(item) != 2:
                raise TypeError("each request must be a (request_id, payload) pair")
            request_id, payload = item
            problem, data = self._checked_request(request_id, payload, trace_problem)
            if problem is not None:
                results.append(Admission(request_id, AdmissionStatus.REJECTED, problem))
            else:
                ready.append((len(results), request_id, data))
                results.append(None)
        for batch in batches(ready, lambda item: utf8_len(item[1]) + len(item[2])):
            if self.optimized:
                answers = fused.admit(
                    self.runner, batch, delay_ms, traceparent or "", self.max_records, priority
                )
            else:
                answers = [
                    reference.admit(
                        self.runner,
                        request_id,
                        data,
                        delay_ms,
                        traceparent or "",
                        self.max_records,
                        priority,
                    )
                    for _, request_id, data in batch
                ]
            for (position, _, _), answer in zip(batch, answers, strict=True):
                results[position] = answer
        return [result for result in results if result is not None]

    # -- claims ---------------------------------------------------------------------

    def claim(self, owner: str, lease: timedelta | float = 30) -> Claim | None:
        """Claim the earliest-due PENDING record for ``owner``, or ``None``."""
        claims = self.claim_many(owner, 1, lease)
        return claims[0] if claims else None

    def claim_many(self, owner: str, limit: int, lease: timedelta | float = 30) -> list[Claim]:
        """Claim up to ``limit`` due records, one round trip per batch of 128."""
        problem = owner_problem(owner)
        if problem is not None:
            raise ValueError(f"owner is not usable ({problem})")
        positive_int(limit, "limit")
        lease_ms = duration_ms(lease, "lease", positive=True)
        claims: list[Claim] = []
        while len(claims) < limit:
            want = min(MAX_BATCH, limit - len(claims))
            if self.optimized:
                got = fused.claim(self.runner, owner, want, lease_ms)
            else:
                got = reference.claim(self.runner, owner, want, lease_ms)
            claims += got
            if len(got) < want:
                break
        return claims

    def renew(self, claim: Claim, lease: timedelta | float = 30) -> Settlement:
        """Extend ``claim``'s lease to now + ``lease`` if it still holds the record."""
        return self.renew_many([(claim, lease)])[0]

    def renew_many(self, items: Iterable[tuple[Claim, timedelta | float]]) -> list[Settlement]:
        """Renew many claims, one round trip per batch; each renewed Claim's lease moves on."""
        work: list[Work] = []
        for item in items:
            if not isinstance(item, tuple | list) or len(item) != 2:
                raise TypeError("each item must be a (claim, lease) pair")
            check_claim(item[0])
            work.append((item[0], "C", duration_ms(item[1], "lease", positive=True), b""))
        settlements = self._settle_batch(work)
        for (claim, *_), answer in zip(work, settlements, strict=True):
            if answer.status is SettlementStatus.RENEWED and answer.record is not None:
                claim.lease_until = answer.record.lease_until or claim.lease_until
        return settlements

    def settle(
        self,
        claim: Claim,
        state: State = State.COMPLETED,
        delay: timedelta | float = 0,
        result: str | bytes | None = None,
    ) -> Settlement:
        """End ``claim`` as COMPLETED or FAILED, or give it back as PENDING after ``delay``.

        ``result`` (text or bytes) is stored under the request id in the same script call
        as the settlement, and only if the settlement is applied; ``results`` reads it.
        """
        return self.settle_many([(claim, state, delay, result)])[0]

    def settle_many(self, items: Iterable[SettleItem]) -> list[Settlement]:
        """Settle many claims, one round trip per batch; only a lost item fails.

        Items are ``(claim, state)``, ``(claim, state, delay)`` or ``(claim, state, delay,
        result)``.
        """
        return self._settle_batch([settle_work(item) for item in items])

    def release(self, claims: Iterable[Claim]) -> list[Settlement]:
        """Give back claims whose work never started: PENDING, due now, the attempt unspent.

        For a worker that stops with prefetched claims in hand. A compare-and-set like
        every settlement: a claim that no longer holds its record answers ``LOST``.
        """
        work: list[Work] = []
        for claim in claims:
            check_claim(claim)
            work.append((claim, "R", 0, b""))
        return self._settle_batch(work)

    def settle_and_claim(
        self,
        items: Iterable[SettleItem],
        owner: str,
        limit: int,
        lease: timedelta | float = 30,
    ) -> tuple[list[Settlement], list[Claim]]:
        """Settle ``items``, then claim up to ``limit`` more for ``owner``.

        Optimized, the last transport batch of settlements and the claims travel in one
        script call: a worker that has just finished gets its next work in the same round
        trip. ``limit`` may be 0 (settle only).
        """
        work = [settle_work(item) for item in items]
        problem = owner_problem(owner)
        if problem is not None:
            raise ValueError(f"owner is not usable ({problem})")
        if isinstance(limit, bool) or not isinstance(limit, int) or not 0 <= limit <= MAX_BATCH:
            raise ValueError(f"limit must be an int from 0 to {MAX_BATCH}, got {limit!r}")
        lease_ms = duration_ms(lease, "lease", positive=True)
        if not self.optimized:
            settled = self._settle_batch(work)
            return settled, reference.claim(self.runner, owner, limit, lease_ms) if limit else []
        parts = list(batches(work, work_size)) or [[]]
        settlements: list[Settlement] = []
        for part in parts[:-1]:
            settlements += fused.settle(self.runner, part, self.max_retained)
        last, claims = fused.settle_and_claim(
            self.runner, parts[-1], self.max_retained, owner, limit, lease_ms
        )
        return settlements + last, claims

    def _settle_batch(self, work: list[Work]) -> list[Settlement]:
        results: list[Settlement] = []
        for batch in batches(work, work_size):
            if self.optimized:
                results += fused.settle(self.runner, batch, self.max_retained)
            else:
                results += [
                    reference.settle(self.runner, *item, max_retained=self.max_retained)
                    for item in batch
                ]
        return results

    def results(self, request_ids: Iterable[str]) -> list[bytes | None]:
        """Return the results stored with settlements, in input order (``None``: none)."""
        return self._read_fields(self.results_key, list(request_ids))

    # -- reads ----------------------------------------------------------------------

    def resolve(self, request_id: str) -> Record | None:
        """Return the verified record of ``request_id``, or ``None``."""
        return self.resolve_many([request_id])[0]

    def resolve_many(self, request_ids: Iterable[str]) -> list[Record | None]:
        """Return verified records in input order, without a round trip per id."""
        ids = list(request_ids)
        raws = self._read_fields(self.records_key, ids)
        return [
            None if raw is None else decode_record(request_id, raw)
            for request_id, raw in zip(ids, raws, strict=True)
        ]

    def _read_fields(self, key: str, ids: list[str]) -> list[bytes | None]:
        """Read the fields ``ids`` of the hash ``key`` (ids checked first), 1,000 a call."""
        for request_id in ids:
            problem = id_problem(request_id)
            if problem is not None:
                raise ValueError(f"request id {request_id!r} is not usable ({problem})")
        found: list[bytes | None] = []
        with self.translate_errors():
            for start in range(0, len(ids), 1000):
                found += self.redis.hmget(key, ids[start : start + 1000])
        return found

    def stats(self) -> Stats:
        """Read the queue's counters in one consistent snapshot, with no scan of records."""
        reply = self.run(self.scripts.stats, [])
        (
            now,
            due,
            later,
            claimed,
            expired,
            completed,
            failed,
            dead,
            quarantined,
            total,
            gate,
            oldest,
        ) = reply
        return Stats(
            pending_due=due,
            pending_later=later,
            claimed=claimed,
            expired_leases=expired,
            completed=completed,
            failed=failed,
            dead=dead,
            quarantined=quarantined,
            total=total,
            gate_closed=bool(gate),
            now=now,
            oldest_due_at=None if oldest < 0 else oldest,
        )

    # -- repair ---------------------------------------------------------------------

    def repair(self, cursor: str = "0", count: int = 100) -> str:
        """Repair one HSCAN page; return the next cursor (``"0"`` ends a cycle)."""
        return self.repair_page(cursor, count).cursor

    def repair_page(self, cursor: str | int = "0", count: int = 100) -> RepairReport:
        """Repair one HSCAN page and say what it did, with the next cursor.

        Before the page, a sweep of the indexes repairs every expired lease and every
        record past its retention (up to ``count`` of each) wherever the scan stands,
        and drops index entries whose record is gone; the page's ``scanned`` counts
        the scanned records only.
        """
        if isinstance(cursor, bool) or not isinstance(cursor, str | int):
            raise TypeError(f"cursor must be a str, not {type(cursor).__name__}")
        if not str(cursor).isdigit() or len(str(cursor)) > 20:
            raise ValueError(f"cursor must be a cursor returned by repair, got {cursor!r}")
        positive_int(count, "count", upper=10_000)
        report = self.sweep(count)
        report.add(self.scan_page(int(cursor), count))
        return report

    def sweep(self, count: int = 100) -> RepairReport:
        """Repair up to ``count`` expired leases and records past retention, from the indexes.

        The first half of ``repair_page``: it reads no page of records (``scanned`` 0),
        and drops index entries whose record is gone.
        """
        positive_int(count, "count", upper=10_000)
        swept = self.run(self.scripts.sweep, [self.retention_ms, count, self.max_retained])
        report = self.repair_records(zip(swept[2::2], swept[3::2], strict=True))
        report.reindexed += swept[0]
        report.purged += swept[1]
        report.scanned = 0
        return report

    def scan_page(self, cursor: int, count: int) -> RepairReport:
        """Repair one HSCAN page of records from ``cursor``; the report holds the next one."""
        with self.translate_errors():
            next_cursor, page = self.redis.hscan(self.records_key, cursor, count=count)
        return self.repair_records(page.items(), str(next_cursor))

    def repair_records(
        self, observed: Iterable[tuple[Any, bytes]], cursor: str = "0"
    ) -> RepairReport:
        """Repair records against the bytes the caller read (a stale read changes nothing)."""
        pairs = [(scanned_id(request_id), raw) for request_id, raw in observed]
        report = RepairReport(cursor=cursor, scanned=len(pairs))
        for batch in batches(pairs, lambda item: len(item[0]) + len(item[1])):
            path = fused if self.optimized else reference
            codes = path.repair(self.runner, batch, self.retention_ms, self.max_attempts)
            for code in codes:
                field = REPAIR_FIELDS.get(code)
                if field is not None:
                    setattr(report, field, getattr(report, field) + 1)
        return report

    def repair_cycle(self, count: int = 100) -> Iterator[RepairReport]:
        """Repair every record once, yielding each page's report (the last has cursor "0")."""
        cursor = "0"
        while True:
            report = self.repair_page(cursor, count)
            yield report
            cursor = report.cursor
            if cursor == "0":
                return

    # -- gate and import ------------------------------------------------------------

    def close_gate(self) -> None:
        """Hold the queue closed: no claim succeeds until ``open_gate``."""
        self.runner.write("SET", self.gate_key, b"closed")

    def open_gate(self) -> None:
        self.runner.write("DEL", self.gate_key)

    @property
    def gate_closed(self) -> bool:
        with self.translate_errors():
            return bool(self.redis.exists(self.gate_key))

    def import_record(
        self,
        request_id: str,
        payload: str,
        state: State,
        due_at: int,
        owner: str = "",
        **extra: Any,
    ) -> Admission:
        """Write one record as given (offline migration: only while the gate is closed).

        ``extra`` may carry ``attempts``, ``fence``, ``lease_until``, ``created_at``,
        ``updated_at`` and ``traceparent``. An existing id must agree exactly with every
        field given (``DUPLICATE``), or it is a ``CONFLICT``.
        """
        fields = {"request_id": request_id, "payload": payload, "state": state, "due_at": due_at}
        fields["owner"] = owner
        fields.update(extra)
        return self.import_many([fields])[0]

    def import_many(self, items: Iterable[Mapping[str, Any]]) -> list[Admission]:
        """Import records given as field mappings, in bounded batches; answers in order.

        Every item is validated before anything is written: a bad one raises
        ``ValueError`` naming the field, and nothing of the call is stored.
        """
        from .importing import prepare_import  # local: import formats are not hot

        now = self.server_time_ms()
        results: list[Admission | None] = []
        ready: list[tuple[int, Record, bytes, frozenset[str]]] = []
        for fields in items:
            record, given = prepare_import(fields, now, self.max_payload_bytes)
            ready.append((len(results), record, encode_record(record), given))
            results.append(None)
        for batch in batches(ready, lambda item: len(item[2])):
            if self.optimized:
                answers = fused.import_records(self.runner, batch, self.max_records)
            else:
                answers = [
                    reference.import_one(self.runner, record, raw, given, self.max_records)
                    for _, record, raw, given in batch
                ]
            for (position, *_), answer in zip(batch, answers, strict=True):
                results[position] = answer
        return [result for result in results if result is not None]
