"""The admin, the API's errors, the system checks and the commands in French, German and Spanish.

Every ledger admin page is fetched with the browser asking for the language
(``Accept-Language``, which ``LocaleMiddleware`` reads), against a real Redis; each must
show a text of its own in that language and not in English. The expected words come
from the shipped catalog (``gettext`` under the language), so a page that stops
translating fails, and a few are spelled out so that the catalog itself is checked too.
"""

from __future__ import annotations

import html
import time
from collections.abc import Iterator
from io import StringIO
from typing import Any
from urllib.parse import urlencode

import pytest
import redis
from django.contrib.admin.utils import quote
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from django.test import Client, override_settings
from django.urls import reverse
from django.utils import translation
from django.utils.translation import gettext
from rest_framework.test import APIClient

from django_ledger.admin.workflows import workflow_url
from django_ledger.checks import check_settings
from django_ledger.checks.schedules import check_schedules
from django_ledger.conf import get_ledger
from django_ledger.core.schedule import state_key
from django_ledger.core.worker import Heartbeats, WorkerInfo
from django_ledger.tasks.workflows import Workflow, si
from tests.support.tasks_app import workflow_tasks as t

pytest_plugins = ["tests.support.api_fixtures"]
pytestmark = pytest.mark.django_db

LANGUAGES = ("fr", "de", "es")
TASK = "tests.support.tasks_app.tasks.noop"
CORRUPT = b"\x00\x01 not a record"


@pytest.fixture(autouse=True)
def language_left_as_found() -> Iterator[None]:
    """Deactivate the language a request activated (LocaleMiddleware leaves it on the thread).

    Without this, the next test in the same process would read French or Spanish.
    """
    yield
    translation.deactivate()


@pytest.fixture
def ledger_pages(
    settings: Any, api_namespace: str, redis_client: redis.Redis
) -> Iterator[dict[str, str]]:
    """Something on every ledger admin page; return each page's URL by name."""
    settings.LEDGER = {
        **settings.LEDGER,
        "QUEUES": {"default": {"RATE": {"LIMIT": 10, "PERIOD": 1, "BURST": 10}}},
        "SCHEDULES": {"nightly": {"TASK": TASK, "CRON": "30 2 * * *"}},
    }
    ledger = get_ledger("default")
    ledger.admit("order-1", '{"n": 1}')
    redis_client.hset(ledger.records_key, "bad-1", CORRUPT)
    assert ledger.repair_records([("bad-1", CORRUPT)]).quarantined == 1
    graph = Workflow()
    graph.add(si(t.plus, 1), name="a")
    flow = graph.enqueue(id="wf-languages")
    now = int(time.time() * 1000)
    Heartbeats(redis_client, api_namespace).beat(
        WorkerInfo(
            worker_id="web-1:4242:abc",
            host="web-1",
            pid=4242,
            queues=["default"],
            concurrency=8,
            started_at=now - 60_000,
            beat_at=now,
        ),
        ttl_s=30,
    )
    record = quote("default order-1")
    yield {
        "records": reverse("admin:django_ledger_record_changelist"),
        "record": reverse("admin:django_ledger_record_change", args=(record,)),
        "quarantine": reverse("admin:django_ledger_quarantinedrecord_changelist"),
        "quarantined": reverse(
            "admin:django_ledger_quarantinedrecord_change", args=(quote("default bad-1"),)
        ),
        "queues": reverse("admin:django_ledger_queue_changelist"),
        "queue": reverse("admin:django_ledger_queue_change", args=("default",)),
        "tasks": reverse("admin:django_ledger_queue_tasks"),
        "workers": reverse("admin:django_ledger_worker_changelist"),
        "worker": reverse("admin:django_ledger_worker_change", args=(quote("web-1:4242:abc"),)),
        "schedules": reverse("admin:django_ledger_schedule_changelist"),
        "schedule": reverse("admin:django_ledger_schedule_change", args=("nightly",)),
        "workflow": workflow_url("default", flow.id),
        "confirm-retry": reverse("admin:django_ledger_record_act", args=("retry",))
        + "?"
        + urlencode({"key": "default order-1"}),
        "confirm-gate": reverse("admin:django_ledger_queue_gate", args=("default", "close")),
        "confirm-schedule": reverse("admin:django_ledger_schedule_act", args=("nightly", "pause")),
    }
    redis_client.delete(state_key(api_namespace))


#: A text of each page's own (as its English msgid): the page must show it translated.
PAGE_TEXTS = {
    "records": "An exact request id.",
    "record": "what an action compares before it writes",
    "quarantine": "bytes (escaped)",
    "quarantined": "Why it fails to decode",
    "queues": "Oldest due waits",
    "queue": "Flow limits",
    "tasks": "Failure rate",
    "workers": "Last beat",
    "worker": "Counts since it started",
    "schedules": "Next fire (UTC, then local)",
    "schedule": "Misfire policy",
    "workflow": "Waits for",
    "confirm-retry": "On confirming",
    "confirm-gate": "No claim succeeds until the gate opens again.",
    "confirm-schedule": "No scheduler admits its fires until it is resumed; fires that come "
    "due meanwhile are not run later.",
}


def superuser_client(language: str) -> Client:
    user = User.objects.create_superuser(f"root-{language}", f"root-{language}@example.com", None)
    client = Client(headers={"accept-language": language})
    client.force_login(user)
    return client


def page_text(client: Client, url: str) -> str:
    response = client.get(url)
    assert response.status_code == 200, (url, response.status_code)
    return html.unescape(response.content.decode()).casefold()


@pytest.mark.parametrize("language", LANGUAGES)
def test_every_ledger_admin_page_speaks_the_browsers_language(
    language: str, ledger_pages: dict[str, str]
) -> None:
    assert set(ledger_pages) == set(PAGE_TEXTS)
    client = superuser_client(language)
    for name, url in ledger_pages.items():
        english = PAGE_TEXTS[name]
        with translation.override(language):
            translated = gettext(english)
        assert translated != english, f"{english!r} has no {language} translation"
        text = page_text(client, url)
        assert translated.casefold() in text, f"{name} page ({url}) does not say {translated!r}"
        assert english.casefold() not in text, f"{name} page ({url}) still says {english!r}"


@pytest.mark.parametrize(
    ("language", "heading", "home"),
    [
        ("fr", "Limites de débit", "Accueil"),
        ("de", "Flusslimits", "Start"),
        ("es", "Límites de flujo", "Inicio"),
    ],
)
def test_the_queue_page_reads_as_written_in_each_catalog(
    language: str, heading: str, home: str, ledger_pages: dict[str, str]
) -> None:
    text = page_text(superuser_client(language), ledger_pages["queue"])
    assert f"<h2>{heading}</h2>".casefold() in text
    assert f">{home}</a>".casefold() in text  # the breadcrumbs, in Django's own word


@pytest.mark.parametrize(
    ("language", "active"), [("fr", "active"), ("de", "aktiv"), ("es", "activa")]
)
def test_an_active_schedule_reads_as_active_in_each_language(
    language: str, active: str, ledger_pages: dict[str, str]
) -> None:
    """The list marks a schedule that does not fire; the state's words never decide it."""
    text = page_text(superuser_client(language), ledger_pages["schedules"])
    assert f"<td>{active}</td>" in text
    assert f'<span class="ledger-bad">{active}</span>' not in text


def test_english_stays_the_default(ledger_pages: dict[str, str]) -> None:
    client = superuser_client("en")
    assert "<h2>flow limits</h2>" in page_text(client, ledger_pages["queue"])


@pytest.mark.parametrize(
    ("language", "message"),
    [
        ("fr", "Aucun enregistrement n\N{RIGHT SINGLE QUOTATION MARK}a cet identifiant."),
        ("de", "Kein Datensatz hat diese ID."),
        ("es", "Ningún registro tiene este id."),
    ],
)
def test_an_api_errors_message_follows_accept_language_and_its_code_does_not(
    language: str, message: str, api_root: APIClient
) -> None:
    response = api_root.get(
        "/api/queues/default/records/no-such-id", headers={"accept-language": language}
    )
    assert response.status_code == 404
    error = response.json()["error"]
    assert error["code"] == "record_not_found"
    assert error["message"] == message
    assert error["details"] == {"request_id": "no-such-id"}
    english = api_root.get("/api/queues/default/records/no-such-id").json()["error"]
    assert english["message"] == "No record has this id."


@pytest.mark.parametrize(
    ("language", "message", "hint_start"),
    [
        ("fr", "LEDGER doit être un dict, pas list.", "Écrivez LEDGER = {...}"),
        ("de", "LEDGER muss ein dict sein, nicht list.", "Schreiben Sie LEDGER = {...}"),
        ("es", "LEDGER debe ser un dict, no list.", "Escriba LEDGER = {...}"),
    ],
)
def test_a_system_check_speaks_the_active_language(
    language: str, message: str, hint_start: str
) -> None:
    with override_settings(LEDGER=[]), translation.override(language):
        (error,) = check_settings()
    assert error.id == "django_ledger.E001"
    assert error.msg == message
    assert error.hint.startswith(hint_start)


@pytest.mark.parametrize(
    ("language", "message"),
    [
        (
            "fr",
            "Donnez exactement un de CRON, EVERY et AT, pas plusieurs.",
        ),
        ("de", "Geben Sie genau eines von CRON, EVERY und AT an, nicht mehrere."),
        ("es", "Indique exactamente uno de CRON, EVERY y AT, no varios."),
    ],
)
def test_a_schedule_check_speaks_the_active_language(
    language: str, message: str, settings: Any
) -> None:
    settings.LEDGER = {
        **settings.LEDGER,
        "SCHEDULES": {"both": {"TASK": TASK, "CRON": "0 3 * * *", "EVERY": 60}},
    }
    with translation.override(language):
        found = [error for error in check_schedules() if error.id == "django_ledger.E074"]
    assert [error.msg for error in found] == [message]


@pytest.mark.parametrize(
    ("language", "message"),
    [
        ("fr", "--count doit être entre 1 et 10000, reçu 0"),
        ("de", "--count muss zwischen 1 und 10000 liegen, erhalten: 0"),
        ("es", "--count debe estar entre 1 y 10000, se recibió 0"),
    ],
)
def test_a_commands_error_speaks_the_active_language(language: str, message: str) -> None:
    with translation.override(language), pytest.raises(CommandError) as raised:
        call_command("ledger_repair", "--count", "0", stdout=StringIO())
    assert str(raised.value) == message


def test_what_code_reads_stays_the_same_in_every_language(
    ledger_pages: dict[str, str],
) -> None:
    """Translated words never leak into ids, data attributes or URLs."""
    for language in LANGUAGES:
        client = superuser_client(language)
        text = page_text(client, ledger_pages["queue"])
        assert 'data-figure="oldest-due"' in text
        assert 'data-figure="pending-due"' in text
        assert 'data-setting="most-attempts"' in text
        assert 'data-limit="slots-taken-records-claimed"' in text
        assert 'id="limits-form"' in text
        assert 'data-field="request-id">order-1<' in page_text(client, ledger_pages["record"])
        assert 'data-field="worker-id">web-1:4242:abc<' in page_text(client, ledger_pages["worker"])
        limits_url = reverse("admin:django_ledger_queue_limits", args=("default",))
        assert f'action="{limits_url}"' in text
