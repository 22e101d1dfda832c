"""Settings of the test and demo project.

Everything a deployment changes comes from the environment: ``REDIS_URL`` (required:
the test suite points it at the redis-server it starts), ``REDIS_CLUSTER`` (optional:
cluster nodes for the ledger), ``LEDGER_NAMESPACE``,
``DATABASE_PATH``, ``DJANGO_DEBUG``, ``DJANGO_SECRET_KEY`` and ``DJANGO_ALLOWED_HOSTS``.
When ``REDIS_URL`` is not set, they come from ``.demo/env`` (``$DEMO_DIR/env``), which
``scripts/demo.sh`` writes while the demo runs (``testproject/env.py``); with neither,
these settings raise ``ImproperlyConfigured`` rather than guess a server.
"""

import importlib.util
import json
import sys
from pathlib import Path

import django

from testproject.env import environment, redis_url

BASE_DIR = Path(__file__).resolve().parent.parent

_env, _env_file = environment(BASE_DIR)
if "mypy" in sys.modules and not _env.get("REDIS_URL"):
    # django-stubs imports these settings to read the models and never connects; a
    # host under .invalid (RFC 6761) resolves nowhere, so nothing can reach a server.
    _env["REDIS_URL"] = "redis://unconfigured.invalid:6379/0"
REDIS_URL = redis_url(_env, _env_file)

SECRET_KEY = _env.get("DJANGO_SECRET_KEY", "django-insecure-ledger-testproject-not-for-production")
DEBUG = _env.get("DJANGO_DEBUG", "").strip().lower() in {"1", "true", "yes", "on"}
ALLOWED_HOSTS = [
    host.strip()
    for host in _env.get("DJANGO_ALLOWED_HOSTS", "127.0.0.1,localhost,testserver").split(",")
    if host.strip()
]

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rangefilter",
    "rest_framework",
    "rest_framework.authtoken",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_ledger",
    # The project's own app: the demo's command (manage.py ledger_demo) and tasks.
    "testproject",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    # The admin and the API answer in the language the browser asks for (Accept-Language).
    "django.middleware.locale.LocaleMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "testproject.urls"
WSGI_APPLICATION = "testproject.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": _env.get("DATABASE_PATH", str(BASE_DIR / "db.sqlite3")),
    }
}

CACHES = {
    "default": {
        "BACKEND": "django_redis.cache.RedisCache",
        "LOCATION": REDIS_URL,
        "OPTIONS": {"CLIENT_CLASS": "django_redis.client.DefaultClient"},
    }
}

# REDIS_CLUSTER ("host:port,host:port"): the ledger on that Redis Cluster instead (the
# suite's cluster mode sets it); the cache stays on REDIS_URL.
_CLUSTER = [node.strip() for node in _env.get("REDIS_CLUSTER", "").split(",") if node.strip()]

LEDGER = {
    "CONNECTION": {"CLUSTER": _CLUSTER} if _CLUSTER else REDIS_URL,
    "NAMESPACE": _env.get("LEDGER_NAMESPACE", "ledger"),
    "QUEUES": {
        "default": {},
        "emails": {},
        "reports": {"MAX_ATTEMPTS": 3},
    },
    # LEDGER_SCHEDULES: JSON of LEDGER['SCHEDULES'] (EVERY and GRACE in seconds), for
    # the scheduler tests' processes and the demo; none by default.
    "SCHEDULES": json.loads(_env.get("LEDGER_SCHEDULES") or "{}"),
}

# The demo (scripts/demo.sh sets LEDGER_DEMO=1): a task queue its worker serves, the demo's
# tasks (testproject/demo_tasks.py), and schedules that keep work flowing through the admin.
if _env.get("LEDGER_DEMO") == "1":
    LEDGER["QUEUES"]["tasks"] = {"MAX_ATTEMPTS": 3, "BACKOFF_BASE": 2, "BACKOFF_CAP": 10}
    LEDGER["SCHEDULES"] = LEDGER["SCHEDULES"] or {
        "receipts": {"TASK": "testproject.demo_tasks.send_receipt", "EVERY": 3},
        # A cron schedule as well, each minute so that the demo shows its fires at once.
        "report-every-minute": {"TASK": "testproject.demo_tasks.build_report", "CRON": "* * * * *"},
    }

# Django's task framework on the ledger (docs/tasks.md): django.tasks on Django 6.0+,
# the django-tasks backport (an app of its own) on 5.2.
if django.VERSION < (6, 0) and importlib.util.find_spec("django_tasks") is not None:
    INSTALLED_APPS.append("django_tasks")
# QUEUES [] lets tasks use every queue of LEDGER['QUEUES'] (tests override LEDGER often).
TASKS = {"default": {"BACKEND": "django_ledger.tasks.LedgerBackend", "QUEUES": []}}

REST_FRAMEWORK = {
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.SessionAuthentication",
        "rest_framework.authentication.TokenAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
}

SPECTACULAR_SETTINGS = {
    "TITLE": "django-ledger",
    "DESCRIPTION": "An idempotent delivery ledger on Redis.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
}

AUTH_PASSWORD_VALIDATORS: list[dict[str, str]] = []

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
