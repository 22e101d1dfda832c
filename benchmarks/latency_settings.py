"""Settings for ``benchmarks/latency_bench.py``: the ledger and its peers, nothing else.

One no-op Django task (``tests.support.bench_tasks_app``, no signal receivers) on two task
backends: ``default`` is the ledger (``LedgerBackend``, one queue), ``dtr`` is
django-tasks-redis when it is installed (Django 6.0+, Python 3.12+). No admin, no REST
framework: the apps each backend needs, so the bench runs from a bare virtualenv.
``REDIS_URL`` and ``LEDGER_NAMESPACE`` come from the environment.
"""

from __future__ import annotations

import importlib.util
import os

import django

SECRET_KEY = "latency-bench"
DEBUG = False
USE_TZ = True
ALLOWED_HOSTS: list[str] = []
DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
INSTALLED_APPS = [
    "django.contrib.contenttypes",
    "django.contrib.auth",
    "django_ledger",
    "tests.support.bench_tasks_app",
]
if django.VERSION < (6, 0):
    INSTALLED_APPS.append("django_tasks")
#: The ledger's admin is not installed here: its date-range filters' app is not needed.
SILENCED_SYSTEM_CHECKS = ["django_ledger.E040"]

REDIS_URL = os.environ.get("REDIS_URL", "redis://127.0.0.1:1/0")
LEDGER = {
    "CONNECTION": REDIS_URL,
    "NAMESPACE": os.environ.get("LEDGER_NAMESPACE", "lat"),
    "QUEUES": {"default": {}},
}
TASKS: dict[str, dict[str, object]] = {
    "default": {"BACKEND": "django_ledger.tasks.LedgerBackend", "QUEUES": ["default"]},
}
#: django-tasks-redis, when installed: its defaults but for where Redis is.
DTR = django.VERSION >= (6, 0) and importlib.util.find_spec("django_tasks_redis") is not None
if DTR:
    INSTALLED_APPS.append("django_tasks_redis")
    TASKS["dtr"] = {
        "BACKEND": "django_tasks_redis.RedisTaskBackend",
        "OPTIONS": {"REDIS_URL": REDIS_URL, "REDIS_KEY_PREFIX": "dtr"},
    }
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler", "level": "WARNING"}},
    "root": {"handlers": ["console"], "level": "WARNING"},
}
