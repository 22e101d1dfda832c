"""Workers: who runs, on which queues, doing what since when, read from their heartbeats.

Each ``ledger_worker`` writes a heartbeat to Redis that expires on its own
(``django_ledger.core.worker.heartbeat``); this page lists the ones that have not
expired, so a worker that died drops off within one heartbeat's lifetime. Nothing here
writes. ``view_worker`` shows the page; a user sees the workers that serve a queue they
reach, the names of those queues only (the others are counted), the running tasks of
those queues only, and a task's record page link only with ``view_record`` on its queue.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from django.contrib import admin
from django.http import HttpRequest, HttpResponse
from django.utils.translation import gettext, gettext_lazy

from .. import permissions
from ..core.errors import LedgerError
from ..core.scripts import call, script
from ..core.transport import Translate
from ..core.worker.heartbeat import Heartbeats, WorkerInfo
from ..models import Worker
from ..services import worker as worker_service
from .base import PagesAdmin, record_url
from .display import Label, count_text, instant_text, relative_text
from .progress import progress_bars

__all__ = ["WorkerAdmin"]


@dataclass(frozen=True)
class RunningRow:
    """One task a worker runs, as this user may see it."""

    request_id: str
    queue: str
    name: str
    attempt: int
    since: str
    since_ago: str
    record_url: str | None
    #: What the task last reported (admin/progress.py, ``progress_bars``), if anything.
    progress: dict[str, Any] | None = None


@dataclass(frozen=True)
class WorkerRow:
    """One live worker as the page shows it."""

    info: WorkerInfo
    url: str
    #: The queues it serves that this user reaches (the others are counted only).
    queues: list[str]
    hidden_queues: int
    started: str
    started_ago: str
    beat: str
    beat_ago: str
    #: (name, label, count): the name is stable, the label in the user's language.
    counts: list[tuple[str, str, str]]
    running: list[RunningRow]
    #: Tasks it runs on queues this user does not reach: counted, never named.
    hidden: int


@admin.register(Worker)
class WorkerAdmin(PagesAdmin):
    actions = None

    # -- permissions ------------------------------------------------------------------

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        user = request.user
        return bool(user.is_active and user.has_perm("django_ledger.view_worker"))

    def can_see(self, request: HttpRequest, info: WorkerInfo) -> bool:
        """Whether this user reaches a queue ``info`` serves (superusers: any worker)."""
        user = request.user
        if getattr(user, "is_superuser", False):
            return True
        return any(permissions.can_reach_queue(user, queue) for queue in info.queues)

    # -- urls and views ---------------------------------------------------------------

    def get_object(
        self, request: HttpRequest, object_id: str, from_field: str | None = None
    ) -> Any:
        info = self._find(request, object_id)[1]
        return None if info is None else Worker(key=info.worker_id)

    def overview(self, request: HttpRequest) -> HttpResponse:
        """List the live workers this user may see, with what each runs."""
        now, found = _read()
        rows = [self._row(request, info, now) for info in found if self.can_see(request, info)]
        context = {"rows": rows, "now": instant_text(now), "data_loss": _data_loss()}
        return self.render(request, "worker_list.html", gettext("Workers"), context)

    def detail_view(self, request: HttpRequest, worker_id: str) -> HttpResponse:
        """Show one live worker: its heartbeat's every field and its running tasks."""
        now, info = self._find(request, worker_id)
        if info is None:
            return self.not_found(request, worker_id)
        row = self._row(request, info, now)
        context = {
            "row": row,
            "fields": [
                (Label.of(gettext_lazy("Worker id")), info.worker_id),
                (Label.of(gettext_lazy("Host")), info.host),
                (Label.of(gettext_lazy("Process id")), str(info.pid)),
                (Label.of(gettext_lazy("Queues")), _queues_text(row)),
                (Label.of(gettext_lazy("Concurrency")), count_text(info.concurrency)),
                (Label.of(gettext_lazy("State")), info.state),
                (Label.of(gettext_lazy("Started")), f"{row.started} ({row.started_ago})"),
                (Label.of(gettext_lazy("Last beat")), f"{row.beat} ({row.beat_ago})"),
            ],
            "now": instant_text(now),
        }
        title = gettext("Worker %(worker_id)s") % {"worker_id": worker_id}
        return self.render(request, "worker_detail.html", title, context)

    # -- reading ----------------------------------------------------------------------

    def _find(self, request: HttpRequest, worker_id: str) -> tuple[int, WorkerInfo | None]:
        """The server's clock and the live worker ``worker_id``, if this user may see it."""
        now, found = _read()
        info = next((i for i in found if i.worker_id == worker_id), None)
        return now, info if info is not None and self.can_see(request, info) else None

    def _row(self, request: HttpRequest, info: WorkerInfo, now: int) -> WorkerRow:
        user = request.user
        superuser = getattr(user, "is_superuser", False)
        queues = [q for q in info.queues if superuser or permissions.can_reach_queue(user, q)]
        running, hidden = [], 0
        for task in sorted(info.running, key=_since):
            queue = str(task.get("queue", ""))
            if not (superuser or permissions.can_reach_queue(user, queue)):
                hidden += 1
                continue
            viewable = permissions.can(user, "view", queue)
            running.append(_running_row(task, now, self.admin_site.name if viewable else None))
        counts = [
            ("processed", gettext("processed"), count_text(info.processed)),
            ("failed", gettext("failed"), count_text(info.failed)),
            ("retried", gettext("retried"), count_text(info.retried)),
            ("lost", gettext("lost"), count_text(info.lost)),
        ]
        if info.data_losses:
            counts.append(
                ("Redis data losses", gettext("Redis data losses"), count_text(info.data_losses))
            )
        return WorkerRow(
            info=info,
            url=self.change_url(info.worker_id),
            queues=queues,
            hidden_queues=len(info.queues) - len(queues),
            started=instant_text(info.started_at),
            started_ago=relative_text(info.started_at, now),
            beat=instant_text(info.beat_at or None),
            beat_ago=relative_text(info.beat_at or None, now),
            counts=counts,
            running=_with_progress(running),
            hidden=hidden,
        )


def _with_progress(running: list[RunningRow]) -> list[RunningRow]:
    """Each running task with its progress bar, if it reported (one read per queue).

    Only where the user may view the queue's records (``record_url``): a note may tell
    of the task's data.
    """
    if not running:
        return running
    bars = progress_bars((row.queue, row.request_id) for row in running if row.record_url)
    return [replace(row, progress=bars.get((row.queue, row.request_id))) for row in running]


def running_on(request: HttpRequest, queue: str, site_name: str) -> list[RunningRow]:
    """What the live workers run from ``queue``, oldest first, each with its bar.

    For a queue page, to a user who may view the queue's records (the caller checks).
    Heartbeats that cannot be read show nothing.
    """
    try:
        now, found = _read()
    except LedgerError:
        return []
    tasks = [task for info in found for task in info.running if task.get("queue") == queue]
    rows = [_running_row(task, now, site_name) for task in sorted(tasks, key=_since)]
    return _with_progress(rows)


def _running_row(task: dict[str, Any], now: int, site_name: str | None) -> RunningRow:
    """One running task's row; with a link to its record page on ``site_name``, if given."""
    queue, request_id, since = str(task.get("queue", "")), str(task.get("id", "")), _since(task)
    url = None if site_name is None else record_url(queue, request_id, site_name)
    return RunningRow(
        request_id=request_id,
        queue=queue,
        name=str(task.get("name") or "-"),
        attempt=int(task.get("attempt", 0)),
        since=instant_text(since or None),
        since_ago=relative_text(since or None, now),
        record_url=url,
    )


def _data_loss() -> str:
    """What the namespace's epoch says of a data loss the workers noticed, or ``""``."""
    beats: Heartbeats = worker_service.heartbeats()
    with Translate("the worker heartbeats"):
        epoch = beats.epochs.read()
    loss = None if epoch is None else epoch.after_loss
    if loss is None:
        return ""
    return gettext(
        "Redis lost the ledger's data: worker %(worker)s noticed it at %(at)s. What it held "
        "before (records, results, heartbeats) is gone; fences went on above every earlier one."
    ) % {"worker": loss.noticed_by, "at": instant_text(loss.noticed_at)}


def _read() -> tuple[int, list[WorkerInfo]]:
    """The Redis server's clock (epoch ms) and every live heartbeat, or ``LedgerError``."""
    beats: Heartbeats = worker_service.heartbeats()
    with Translate("the worker heartbeats"):
        # TIME from a script on the heartbeats' key: on a cluster, the clock of the node
        # that holds them (a bare TIME goes to whichever node the client picks).
        seconds, micros = call(beats.redis, script("server_time"), [beats.index_key], [])
        found = beats.live()
    return int(seconds) * 1000 + int(micros) // 1000, found


def _queues_text(row: WorkerRow) -> str:
    shown = ", ".join(row.queues)
    if not row.hidden_queues:
        return shown
    return gettext("%(shown)s (and %(hidden)s you do not reach)") % {
        "shown": shown,
        "hidden": row.hidden_queues,
    }


def _since(task: dict[str, Any]) -> int:
    value = task.get("since")
    return int(value) if isinstance(value, int | float) else 0
