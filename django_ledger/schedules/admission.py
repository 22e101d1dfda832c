"""Admit a fire as the task its schedule names, under the fire's stable request id.

A ``TASK`` that is a task of a ``LedgerBackend`` (``@task`` with ``TASKS`` naming
``django_ledger.tasks.LedgerBackend``) goes through the backend,
``django_ledger.tasks.enqueue_once(task.using(queue_name=QUEUE, priority=PRIORITY),
request_id, *ARGS, **KWARGS)``, so it is validated, signalled and encoded as every
other enqueue. Anything else that imports (a plain function for a raw queue whose
``HANDLER`` reads the payload, or a task of another backend) is admitted to the ledger
directly with the same payload document (``core.jobs.encode_task``). Either way the
answer is the ledger's admission status.
"""

from __future__ import annotations

import logging
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import import_string

from ..conf import get_ledger
from ..core.jobs import encode_task
from ..core.results import AdmissionStatus
from ..core.schedule import Fire
from .config import ScheduleConfig
from .monitoring import fired

__all__ = ["admit_fire", "ledger_task"]

logger = logging.getLogger("django_ledger.scheduler")


def admit_fire(fire: Fire, config: ScheduleConfig) -> AdmissionStatus:
    """Admit ``fire`` of the schedule ``config``; answer the admission status.

    A schedule with a ``MONITOR`` gets an error check-in queued (sent by another thread)
    when the ledger rejects the fire; the worker tells the start and end of its task.
    """
    status = _admit(fire, config)
    fired(fire, config.monitor, status)
    return status


def _admit(fire: Fire, config: ScheduleConfig) -> AdmissionStatus:
    task = ledger_task(config.task)
    if task is not None:
        return _enqueue(task, fire, config)
    payload = encode_task(config.task, list(config.args), config.kwargs)
    admission = get_ledger(config.queue).admit(fire.request_id, payload, priority=config.priority)
    if admission.status in (AdmissionStatus.CONFLICT, AdmissionStatus.REJECTED):
        logger.warning(
            "fire %s: %s (%s) on queue %r",
            fire.request_id,
            admission.status,
            admission.reason,
            config.queue,
        )
    return admission.status


def ledger_task(path: str) -> Any:
    """Return the task ``path`` names if a ``LedgerBackend`` runs it, else ``None``."""
    try:
        from ..tasks.backend import LedgerBackend
        from ..tasks.compat import Task
    except ImproperlyConfigured:  # Django 5.2 without the django-tasks backport
        return None
    target = import_string(path)
    if not isinstance(target, Task):
        return None
    try:
        backend = target.get_backend()
    except Exception:  # an alias TASKS does not define: not ours to enqueue
        return None
    return target if isinstance(backend, LedgerBackend) else None


def _enqueue(task: Any, fire: Fire, config: ScheduleConfig) -> AdmissionStatus:
    from ..tasks import QueueFull, TaskIdConflict, enqueue_once
    from ..tasks.compat import InvalidTask, task_enqueued

    admitted: list[str] = []

    def enqueued(sender: Any, task_result: Any, **kwargs: Any) -> None:
        # The backend signals an enqueue only for a new admission, not for a repeat.
        if task_result.id == fire.request_id:
            admitted.append(task_result.id)

    task_enqueued.connect(enqueued, weak=False)
    try:
        call = task.using(queue_name=config.queue, priority=config.priority)
        enqueue_once(call, fire.request_id, *config.args, **config.kwargs)
    except TaskIdConflict as exc:
        logger.warning("fire %s: %s", fire.request_id, exc)
        return AdmissionStatus.CONFLICT
    except QueueFull:
        return AdmissionStatus.FULL
    except (InvalidTask, TypeError, ValueError) as exc:
        logger.error("fire %s: the task backend refused it: %s", fire.request_id, exc)
        return AdmissionStatus.REJECTED
    finally:
        task_enqueued.disconnect(enqueued)
    return AdmissionStatus.ADMITTED if admitted else AdmissionStatus.DUPLICATE
