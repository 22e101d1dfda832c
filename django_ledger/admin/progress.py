"""What a task reported, in the admin: the record page's progress bar, and running lists.

The record page shows the bar with the note and the metadata; its live toggle fetches
the bar alone (``?fragment=progress``: one record read and one progress read) every
two seconds while the task runs. The Workers page's running tasks show a bar each.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.utils.translation import gettext

from ..conf import get_ledger
from ..core.errors import LedgerError
from ..core.progress import Progress, read_progress
from ..core.records import Record, State
from ..core.sharded import AnyLedger
from .display import instant_text

__all__ = ["progress_bars", "progress_fragment", "progress_section"]


def _number(value: float) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def progress_section(progress: Progress | None, record: Record) -> dict[str, Any]:
    """What the bar shows of ``progress`` (``None``: nothing reported yet)."""
    running = record.state is State.CLAIMED and not record.held
    if progress is None:
        return {"reported": False, "running": running}
    earlier = progress.fence != record.fence
    return {
        "reported": True,
        "running": running,
        **_bar(progress),
        "done": _number(progress.done),
        "total": "" if progress.total is None else _number(progress.total),
        "percent": progress.percent,
        "at": instant_text(progress.at),
        "earlier": earlier,
        "metadata": json.dumps(progress.metadata, ensure_ascii=False, indent=2, sort_keys=True)
        if progress.metadata
        else "",
    }


def _bar(progress: Progress) -> dict[str, Any]:
    """What a bar draws of ``progress``: its value, its maximum, its label and note."""
    return {
        "value": progress.done,
        "max": progress.total or 0,
        "label": _label(progress),
        "note": progress.note,
    }


def _label(progress: Progress) -> str:
    if progress.total is None:
        return gettext("%(done)s done") % {"done": _number(progress.done)}
    return gettext("%(done)s of %(total)s (%(percent)s%%)") % {
        "done": _number(progress.done),
        "total": _number(progress.total),
        "percent": progress.percent,
    }


def read_section(ledger: AnyLedger, record: Record) -> dict[str, Any]:
    """Read the task's progress and make the section (Redis away: nothing shown)."""
    try:
        (progress,) = read_progress(ledger, [record.request_id])
    except LedgerError:
        progress = None
    return progress_section(progress, record)


def progress_fragment(request: HttpRequest, ledger: AnyLedger, request_id: str) -> HttpResponse:
    """The record page's bar alone, for its live toggle (the caller checked permissions)."""
    try:
        record = ledger.resolve(request_id)
    except (LedgerError, ValueError):  # corrupt, or no usable id: the full page says why
        record = None
    if record is None:
        return HttpResponse(status=404)
    context = {"progress": read_section(ledger, record)}
    return TemplateResponse(request, "admin/django_ledger/_progress.html", context)


def progress_bars(pairs: Iterable[tuple[str, str]]) -> dict[tuple[str, str], dict[str, Any]]:
    """The bar of each running task ``(queue, request_id)`` that reported: one read per queue."""
    by_queue: dict[str, list[str]] = {}
    for queue, request_id in pairs:
        by_queue.setdefault(queue, []).append(request_id)
    bars: dict[tuple[str, str], dict[str, Any]] = {}
    for queue, ids in by_queue.items():
        try:
            found = read_progress(get_ledger(queue), ids)
        except (LedgerError, ValueError, ImproperlyConfigured):
            continue  # a queue this process cannot reach, or an id no record may have
        for request_id, progress in zip(ids, found, strict=True):
            if progress is not None:
                bars[(queue, request_id)] = _bar(progress)
    return bars
