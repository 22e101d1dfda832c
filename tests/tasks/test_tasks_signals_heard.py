"""Django's task signals are sent when something would act on them, and only then.

Django's own receivers of ``task_started`` and ``task_finished`` each write one log line
(INFO; ERROR with the traceback for a failure). With Django's default logging and
``DEBUG`` off no handler writes the INFO lines, so a worker skips them and the
``TaskResult`` they carry (``tasks/heard.py``). These tests hold what a user sees: the
lines are there as soon as a handler would write them, a failure's line always reaches
a handler at ERROR (the admins' mail, an error tracker), and any other receiver hears
every attempt.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest
from django.test import override_settings
from django.utils.log import AdminEmailHandler, RequireDebugFalse, RequireDebugTrue

from django_ledger.conf import get_ledger
from django_ledger.core.worker.handler import Job, Outcome
from django_ledger.tasks.attempt import TaskAttempt
from django_ledger.tasks.compat import task_finished, task_started
from django_ledger.tasks.handler import TaskHandler
from django_ledger.tasks.heard import _own, emits, heard
from tests.support.tasks_app import tasks
from tests.support.tasks_helpers import task_settings

pytest_plugins = ["tests.support.tasks_fixtures"]


class Kept(logging.Handler):
    """A handler that keeps what reaches its output."""

    def __init__(self, level: int = logging.NOTSET) -> None:
        super().__init__(level)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


class Mail(AdminEmailHandler):
    """Django's admins' mail handler, keeping what it would send."""

    def __init__(self) -> None:
        super().__init__()
        self.setLevel(logging.ERROR)  # as DEFAULT_LOGGING configures it
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def detached(name: str, parent: logging.Logger | None = None) -> logging.Logger:
    """A logger outside the process's hierarchy (``parent``: its only ancestor)."""
    logger = logging.Logger(name)
    logger.parent = parent  # type: ignore[assignment]
    return logger


def django_default() -> tuple[logging.Logger, Kept, Mail]:
    """Django's DEFAULT_LOGGING for ``django`` (console and mail), and a child logger."""
    django_logger = detached("django")
    django_logger.setLevel(logging.INFO)
    console = Kept(logging.INFO)
    console.addFilter(RequireDebugTrue())
    mail = Mail()
    mail.addFilter(RequireDebugFalse())
    django_logger.addHandler(console)
    django_logger.addHandler(mail)
    return detached("django.tasks", django_logger), console, mail


# -- emits: whether a handler would write a record ----------------------------------------


@override_settings(DEBUG=False)
def test_djangos_default_logging_writes_no_info_line_with_debug_off() -> None:
    tasks_logger, _, _ = django_default()
    assert not emits(tasks_logger, logging.INFO)
    assert emits(tasks_logger, logging.ERROR)  # the admins' mail


@override_settings(DEBUG=True)
def test_djangos_default_logging_writes_info_lines_with_debug_on() -> None:
    tasks_logger, _, _ = django_default()
    assert emits(tasks_logger, logging.INFO)
    assert emits(tasks_logger, logging.ERROR)  # the console


def test_no_handler_at_all_leaves_pythons_last_resort() -> None:
    logger = detached("alone")
    logger.setLevel(logging.DEBUG)
    assert logging.lastResort is not None
    assert not emits(logger, logging.INFO)
    assert emits(logger, logging.WARNING)


def test_a_logger_not_enabled_for_the_level_emits_nothing() -> None:
    logger = detached("quiet")
    logger.setLevel(logging.WARNING)
    logger.addHandler(Kept())
    assert not emits(logger, logging.INFO)


def test_a_handler_above_the_level_or_past_a_propagate_stop_writes_nothing() -> None:
    root = detached("root")
    root.addHandler(Kept())
    stop = detached("stop", root)
    stop.propagate = False
    stop.addHandler(Kept(logging.ERROR))
    child = detached("stop.child", stop)
    child.setLevel(logging.INFO)
    assert not emits(child, logging.INFO)
    stop.propagate = True
    assert emits(child, logging.INFO)


@override_settings(DEBUG=False)
def test_a_filter_it_cannot_judge_counts_as_writing() -> None:
    logger = detached("filtered")
    logger.setLevel(logging.INFO)
    handler = Kept()
    handler.addFilter(lambda record: False)
    logger.addHandler(handler)
    assert emits(logger, logging.INFO)
    plain = detached("own-filter")
    plain.setLevel(logging.INFO)
    plain.addFilter(lambda record: True)
    plain.addHandler(Kept(logging.ERROR))
    assert emits(plain, logging.INFO)


@override_settings(DEBUG=False)
def test_a_patched_logging_machinery_sees_every_record(monkeypatch: pytest.MonkeyPatch) -> None:
    tasks_logger, _, _ = django_default()
    original = logging.Logger.callHandlers

    def tracker(self: logging.Logger, record: logging.LogRecord) -> None:  # an error tracker's
        original(self, record)

    tracker.__module__ = "an_error_tracker.integrations.logging"
    monkeypatch.setattr(logging.Logger, "callHandlers", tracker)
    assert emits(tasks_logger, logging.INFO)


# -- heard, and what a worker's attempt sends -------------------------------------------


@pytest.fixture
def own_logger(monkeypatch: pytest.MonkeyPatch) -> Iterator[logging.Logger]:
    """Django's task logger cut off from the process's handlers (pytest's among them).

    Its receivers are the only ones left connected (the tests' task app records every
    signal in worker processes).
    """
    for signal, name in ((task_started, "task_started"), (task_finished, "task_finished")):
        found = _own(signal, name)
        assert found is not None, f"Django's own {name} receiver is connected"
        own = [entry for entry in signal.receivers if entry[0][0] == id(found[0])]
        assert len(own) == 1
        monkeypatch.setattr(signal, "receivers", own)
    logger = found[1]
    # pytest attaches its capture to every logger that does not propagate: this one
    # propagates, to an ancestor outside the process's hierarchy.
    monkeypatch.setattr(logger, "parent", detached("outside"))
    monkeypatch.setattr(logger, "propagate", True)
    monkeypatch.setattr(logger, "handlers", [])
    monkeypatch.setattr(logger, "level", logging.INFO)
    logging.Logger.manager._clear_cache()
    yield logger
    logging.Logger.manager._clear_cache()


def written(outcome: Outcome) -> Outcome:
    """Tell ``outcome`` its settlement was written, as the worker does after settling it."""
    if outcome.settled is not None:
        outcome.settled(True)
    return outcome


def attempt_of(task: Any, *args: Any) -> TaskAttempt:
    result = task.enqueue(*args)
    claim = get_ledger("default").claim("w")
    assert claim is not None and claim.request_id == result.id
    handler = TaskHandler("default")
    job = Job(claim=claim, queue="default", worker_id="w", started_at=claim.lease_until - 30_000)
    return TaskAttempt(handler._current()[2], job, handler.plan(job))  # type: ignore[arg-type]


@override_settings(DEBUG=False)
def test_nothing_writing_the_lines_skips_the_signals_and_their_result(
    task_namespace: str, own_logger: logging.Logger
) -> None:
    console = Kept(logging.INFO)
    console.addFilter(RequireDebugTrue())
    own_logger.addHandler(console)
    assert not heard(task_started, "task_started", logging.INFO)
    attempt = attempt_of(tasks.add, 1, 2)
    assert attempt.result is None  # no TaskResult is built for nobody
    outcome = attempt.run_sync()
    assert outcome.result is not None and '"return_value":3' in outcome.result
    assert console.records == []


@override_settings(DEBUG=False)
def test_a_handler_that_writes_gets_both_lines(
    task_namespace: str, own_logger: logging.Logger
) -> None:
    kept = Kept(logging.INFO)
    own_logger.addHandler(kept)
    attempt = attempt_of(tasks.add, 1, 2)
    written(attempt.run_sync())
    lines = [record.getMessage() for record in kept.records]
    assert len(lines) == 2, lines
    assert "state=RUNNING" in lines[0] and "state=SUCCESSFUL" in lines[1]


@override_settings(DEBUG=False)
def test_a_failure_reaches_the_admins_mail_while_successes_cost_nothing(
    namespace: str, own_logger: logging.Logger
) -> None:
    mail = Mail()
    mail.addFilter(RequireDebugFalse())
    own_logger.addHandler(mail)
    with task_settings(namespace, default={"MAX_ATTEMPTS": 1}):
        quiet = attempt_of(tasks.add, 1, 2)
        assert quiet.result is None
        written(quiet.run_sync())
        failing = attempt_of(tasks.fail, "a message to find")
        assert failing.result is None
        outcome = written(failing.run_sync())
    assert outcome.state.name == "FAILED"
    assert len(mail.records) == 1
    record = mail.records[0]
    assert record.levelno == logging.ERROR and "state=FAILED" in record.getMessage()
    assert record.exc_info is not None and "a message to find" in str(record.exc_info[1])


@override_settings(DEBUG=False)
def test_any_other_receiver_hears_every_attempt(
    task_namespace: str, own_logger: logging.Logger
) -> None:
    heard_ids: list[tuple[str, str]] = []

    def receiver(sender: type, task_result: Any, **kwargs: Any) -> None:
        heard_ids.append((task_result.id, task_result.status.name))

    task_started.connect(receiver, weak=False)
    task_finished.connect(receiver, weak=False)
    try:
        attempt = attempt_of(tasks.add, 1, 2)
        written(attempt.run_sync())
    finally:
        task_started.disconnect(receiver)
        task_finished.disconnect(receiver)
    rid = attempt.job.claim.request_id
    assert heard_ids == [(rid, "RUNNING"), (rid, "SUCCESSFUL")]
