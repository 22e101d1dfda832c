"""Change a queue's number of shards offline: export, empty, re-lay, import, verify.

A queue's number of shards decides which shard holds each id, so it cannot change while
the queue holds records (``core/layout.py``). ``reshard_queue`` moves every record to
the layout the ``LEDGER`` setting now gives (``SHARDS``), with the queue's gate closed
and no claim in hand: it writes every record to a backup file first (the
``ledger_export`` format) and the stored results beside it (``BACKUP.results``, one JSON
line per id, base64), deletes the old shards' keys, records the new layout, imports the
file with ``import_lines`` (every record read back and compared) and writes the results
back. If it stops between the deletion and the end of the import, the backup holds
every record: ``ledger_import --queue NAME BACKUP`` finishes the job (re-importing is
harmless), and ``restore_results`` puts the results back.
"""

from __future__ import annotations

import base64
import json
import os
from dataclasses import dataclass
from pathlib import Path

from ..conf import build_ledger, ledger_settings
from ..core.errors import LedgerError
from ..core.layout import homes_key, layout_key, stored_shards
from ..core.ledger import Ledger
from ..core.sharded import AnyLedger
from .formats import read_jsonl
from .transfer import ImportResult, export_queue, import_lines

__all__ = ["ReshardRefused", "ReshardResult", "reshard_queue", "restore_results"]

#: Results written back per ``HSET``.
_RESULTS_BATCH = 500


class ReshardRefused(LedgerError):
    """The queue cannot be resharded as it stands (nothing was changed)."""


@dataclass
class ReshardResult:
    queue: str
    before: int
    after: int
    records: int = 0
    results: int = 0
    imported: ImportResult | None = None


def reshard_queue(queue: str, backup: Path, dry_run: bool = False) -> ReshardResult:
    """Lay ``queue``'s records out in the number of shards its setting gives now.

    Refused (``ReshardRefused``, nothing changed, the gate as it was) while a record is
    claimed (stop the queue's workers first), while ids are quarantined (discard or
    restore them: an export skips them), or when ``backup`` exists already.
    ``dry_run`` says what would be done and writes nothing but the backup's check.
    """
    target = ledger_settings.queue(queue).shards
    probe = build_ledger(queue, 1)
    before = stored_shards(probe.shards[0].runner, probe.namespace, queue)
    result = ReshardResult(queue, before, target)
    if before == target:
        return result
    old = build_ledger(queue, before)
    stats = old.stats()
    result.records = stats.total
    for path in (backup, results_path(backup)):
        if path.exists():
            raise ReshardRefused(f"{path} exists: give a new file for the backup")
    if dry_run:
        _refusal(stats.claimed, stats.quarantined)
        return result
    was_closed = old.gate_closed
    old.close_gate()
    try:
        stats = old.stats()  # with no claim possible any more
        _refusal(stats.claimed, stats.quarantined)
        exported = _write_backup(old, backup)
        result.results = _write_results(old, results_path(backup))
        if exported != stats.total:
            raise ReshardRefused(
                f"the backup holds {exported} of the queue's {stats.total} records (corrupt "
                "bytes are skipped): run ledger_repair first; nothing was changed"
            )
    except BaseException:
        if not was_closed:
            old.open_gate()
        raise
    result.records = exported
    _delete(old)
    new = build_ledger(queue, target)
    new.check_layout()  # the queue is empty: this records the new number
    new.close_gate()
    with backup.open("rb") as lines:
        result.imported = import_lines(new, read_jsonl(lines), keep_gate=True)
    restore_results(new, results_path(backup))
    if result.imported.ok and not was_closed:
        new.open_gate()
        result.imported.gate = "opened"
    return result


def results_path(backup: Path) -> Path:
    """Where the stored results are written beside the backup of the records."""
    return backup.with_name(backup.name + ".results")


def restore_results(ledger: AnyLedger, path: Path) -> int:
    """Write the results saved in ``path`` into ``ledger``, each on its id's shard."""
    pending: dict[Ledger, list[bytes | str]] = {}
    count = 0
    with path.open(encoding="utf-8") as lines:
        for line in lines:
            item = json.loads(line)
            shard = ledger.shard_for(item["request_id"])
            pairs = pending.setdefault(shard, [])
            pairs += (item["request_id"], base64.b64decode(item["result"]))
            count += 1
            if len(pairs) >= 2 * _RESULTS_BATCH:
                shard.runner.write("HSET", shard.results_key, *pending.pop(shard))
    for shard, pairs in pending.items():
        shard.runner.write("HSET", shard.results_key, *pairs)
    return count


def _refusal(claimed: int, quarantined: int) -> None:
    if claimed:
        raise ReshardRefused(
            f"{claimed} record(s) are claimed: stop the queue's workers (and let their "
            "leases end or be repaired) first; nothing was changed"
        )
    if quarantined:
        raise ReshardRefused(
            f"{quarantined} id(s) are quarantined: discard or restore them first (an "
            "export skips them); nothing was changed"
        )


def _write_backup(ledger: AnyLedger, backup: Path) -> int:
    """Write every record to ``backup`` and make it durable before anything is deleted."""
    with backup.open("x", encoding="utf-8", newline="") as out:
        exported = export_queue(ledger, out, "jsonl")
        out.flush()
        os.fsync(out.fileno())
    return exported.records


def _write_results(ledger: AnyLedger, path: Path) -> int:
    """Write every stored result (base64, by request id) to ``path``, durably."""
    count = 0
    with path.open("x", encoding="utf-8") as out:
        for shard in ledger.shards:
            with shard.translate_errors():
                for request_id, raw in shard.redis.hscan_iter(shard.results_key, count=1000):
                    text = base64.b64encode(raw).decode("ascii")
                    out.write(json.dumps({"request_id": request_id.decode(), "result": text}))
                    out.write("\n")
                    count += 1
        out.flush()
        os.fsync(out.fileno())
    return count


def _delete(ledger: AnyLedger) -> None:
    """Delete every key of every shard of the old layout, and the layout's own keys."""
    for shard in ledger.shards:
        shard.runner.write("DEL", *shard.keys)
    namespace, queue = ledger.namespace, ledger.queue
    ledger.shards[0].runner.write("DEL", layout_key(namespace, queue), homes_key(namespace, queue))
