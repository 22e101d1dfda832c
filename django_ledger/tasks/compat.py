"""Django's task framework, wherever it lives: ``django.tasks`` (6.0+) or the backport.

On Django 5.2 the framework is the ``django-tasks`` backport (``pip install
'django-task-ledger[tasks]'``), whose names differ a little (``InvalidTaskError``); every
other module of this package imports the framework from here, under Django's names.
The type checker always reads ``django.tasks`` (django-stubs describes it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import django
from django.core.exceptions import ImproperlyConfigured

__all__ = [
    "DEFAULT_TASK_BACKEND_ALIAS",
    "DEFAULT_TASK_PRIORITY",
    "DEFAULT_TASK_QUEUE_NAME",
    "FRAMEWORK",
    "BaseTaskBackend",
    "InvalidTask",
    "Task",
    "TaskContext",
    "TaskError",
    "TaskException",
    "TaskResult",
    "TaskResultDoesNotExist",
    "TaskResultMismatch",
    "TaskResultStatus",
    "normalize_json",
    "task",
    "task_backends",
    "task_enqueued",
    "task_finished",
    "task_started",
]

if TYPE_CHECKING or django.VERSION >= (6, 0):
    from django.tasks import task, task_backends
    from django.tasks.backends.base import BaseTaskBackend
    from django.tasks.base import (
        DEFAULT_TASK_BACKEND_ALIAS,
        DEFAULT_TASK_PRIORITY,
        DEFAULT_TASK_QUEUE_NAME,
        Task,
        TaskContext,
        TaskError,
        TaskResult,
        TaskResultStatus,
    )
    from django.tasks.exceptions import (
        InvalidTask,
        TaskException,
        TaskResultDoesNotExist,
        TaskResultMismatch,
    )
    from django.tasks.signals import task_enqueued, task_finished, task_started
    from django.utils.json import normalize_json

    #: Which framework runs: ``"django.tasks"`` or ``"django_tasks"`` (the backport).
    FRAMEWORK = "django.tasks"
else:  # pragma: no cover - exercised by the Django 5.2 test environment
    try:
        import django_tasks  # noqa: F401
    except ImportError as exc:
        raise ImproperlyConfigured(
            "django_ledger.tasks needs Django's task framework: Django 6.0 or later, or on "
            f"Django {django.get_version()} the django-tasks backport "
            "(pip install 'django-task-ledger[tasks]')"
        ) from exc
    from django_tasks import task, task_backends
    from django_tasks.backends.base import BaseTaskBackend
    from django_tasks.base import (
        DEFAULT_TASK_BACKEND_ALIAS,
        DEFAULT_TASK_PRIORITY,
        DEFAULT_TASK_QUEUE_NAME,
        Task,
        TaskContext,
        TaskError,
        TaskResult,
        TaskResultStatus,
    )
    from django_tasks.exceptions import InvalidTaskError as InvalidTask
    from django_tasks.exceptions import (
        TaskException,
        TaskResultDoesNotExist,
        TaskResultMismatch,
    )
    from django_tasks.signals import task_enqueued, task_finished, task_started
    from django_tasks.utils import normalize_json

    FRAMEWORK = "django_tasks"
