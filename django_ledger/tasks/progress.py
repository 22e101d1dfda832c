"""Progress and metadata from inside a task: ``context.set_progress``, ``context.metadata``.

Shaped after Django's proposal for task metadata (a writable JSON ``dict`` on the
result, read and changed through the task's context, saved when the task finishes and
on ``save_metadata()``), so a project can move between backends. The writes are the
core's (``core/progress.py``): noted in memory, written coalesced and fenced.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from ..core.errors import LedgerError
from ..core.progress import Progress, ProgressPad, board, check_progress, encode_metadata

__all__ = ["Progress", "ProgressReporting", "Reports", "report_progress", "start_reports"]

log = logging.getLogger("django_ledger.tasks")


class Reports:
    """One attempt's reports: its pad (``None`` outside a worker) and its metadata dict."""

    __slots__ = ("_metadata", "pad")

    def __init__(self, pad: ProgressPad | None) -> None:
        self.pad = pad
        self._metadata: dict[str, Any] | None = None

    @property
    def metadata(self) -> dict[str, Any]:
        if self._metadata is None:
            self._metadata = {} if self.pad is None else self.pad.load_metadata()
        return self._metadata

    def save_metadata(self) -> None:
        if self._metadata is None:
            return  # never read, so never changed
        if self.pad is None:
            encode_metadata(self._metadata)  # checked all the same
        else:
            self.pad.set_metadata(self._metadata)

    def set_progress(self, done: float, total: float | None, note: str) -> None:
        if self.pad is None:
            check_progress(done, total, note)
        else:
            self.pad.set_progress(done, total, note)

    def finish(self, task_name: str) -> None:
        """The attempt ended: save the metadata, write what is left, leave the board."""
        pad = self.pad
        try:
            self.save_metadata()
        except (TypeError, ValueError) as exc:
            log.warning("%s: its metadata was not saved at its end: %s", task_name, exc)
        if pad is None:
            return
        try:
            pad.flush()
        except LedgerError as exc:
            log.warning("%s: its last progress was not written: %s", task_name, exc)
        finally:
            board.discard(pad)


def start_reports(ledger: Any, request_id: str, fence: int) -> Reports:
    """The reports of an attempt of ``request_id`` under ``fence``, its pad on the board."""
    if not getattr(ledger, "optimized", False):
        return Reports(None)  # the reference path keeps no progress: checked, not stored
    return Reports(board.pad(ledger, request_id, fence))


class ProgressReporting:
    """What ``LedgerTaskContext`` offers a task to report with (it holds ``reports``)."""

    __slots__ = ()
    reports: Reports | None

    def _reports(self) -> Reports:
        reports = self.reports
        if reports is None:  # a context made by hand (a test): checked, kept in memory
            reports = Reports(None)
            object.__setattr__(self, "reports", reports)
        return reports

    def set_progress(self, done: float, total: float | None = None, note: str = "") -> None:
        """Report ``done`` of ``total`` (``None``: unknown) and a short note.

        Call it as often as you like: the value is written at most once per second or
        so (the worker's ``--progress-interval``), and the last one when the attempt ends.
        ``done`` and ``total`` are numbers of at least 0; the note at most 200
        characters. A bad value raises ``TypeError``/``ValueError`` and changes nothing.
        """
        self._reports().set_progress(done, total, note)

    @property
    def metadata(self) -> dict[str, Any]:
        """The task's metadata: a ``dict`` of JSON values, kept across its attempts.

        Change it in place and call ``save_metadata()``, or let the attempt's end save
        it. At most 4,096 bytes as JSON.
        """
        return self._reports().metadata

    def set_metadata(self, values: Mapping[str, Any] | None = None, /, **more: Any) -> None:
        """Update the metadata with ``values`` and ``more``, and save it (all or nothing)."""
        reports = self._reports()
        merged = {**reports.metadata, **(values or {}), **more}
        encode_metadata(merged)  # refused whole: the dict is left as it was
        reports.metadata.clear()
        reports.metadata.update(merged)
        reports.save_metadata()

    def save_metadata(self) -> None:
        """Save ``metadata`` as it is now (written coalesced, as progress)."""
        self._reports().save_metadata()

    async def asave_metadata(self) -> None:
        """``save_metadata`` for coroutine tasks."""
        self.save_metadata()  # only noted here: the write is the worker's


def report_progress(context: Any, done: float, total: float | None = None, note: str = "") -> None:
    """``context.set_progress(...)`` where the task runs on this backend; else nothing.

    For a task that must also run under another backend (Django's ``ImmediateBackend`` in
    tests, say), whose context has no ``set_progress``.
    """
    setter = getattr(context, "set_progress", None)
    if setter is not None:
        setter(done, total, note)
