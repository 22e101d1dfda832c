"""``django_ledger.tasks.task`` keeps the function's types for type checkers.

mypy (strict, with the project's django-stubs plugin) reads a small module that
declares tasks with the ledger's decorator: the revealed types name the function's
parameters and return type, and a call with a wrong argument is an error.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

mypy_api = pytest.importorskip("mypy.api")

ROOT = Path(__file__).resolve().parents[2]

SNIPPET = textwrap.dedent(
    """
    from typing import Any

    from django_ledger.tasks.ledger_task import task


    @task
    def send(user_id: int, subject: str = "") -> bool:
        return True


    @task(max_attempts=3, queue_name="default")
    def total(values: list[int]) -> int:
        return sum(values)


    @task(takes_context=True)
    def report(context: Any, day: str) -> None:
        return None


    reveal_type(send)
    reveal_type(total)
    reveal_type(report)
    reveal_type(send.enqueue(1, subject="hi"))
    reveal_type(send.using(priority=5))
    send.enqueue("one")
    report.enqueue(day=3)
    """
)


_CONFIG = """\
[mypy]
follow_imports = silent
[mypy-django_ledger.core.*,django_ledger.tasks.options,django_ledger.tasks.registry]
follow_imports = skip
"""


def test_the_public_decorator_is_the_one_checked() -> None:
    from django_ledger import tasks
    from django_ledger.tasks import ledger_task

    assert tasks.task is ledger_task.task


def test_task_decorator_keeps_parameters_and_return_types(tmp_path: Path) -> None:
    module = tmp_path / "typed_tasks.py"
    module.write_text(SNIPPET)
    # Only the decorator's module and Django's task stubs are read: the rest of the
    # package (the core, the options) stays out, which keeps this test to seconds.
    (tmp_path / "none.ini").write_text(_CONFIG)
    out, err, _ = mypy_api.run(
        [
            "--config-file",
            str(tmp_path / "none.ini"),
            "--strict",
            "--no-incremental",
            "--cache-dir",
            str(tmp_path / "cache"),
            "--follow-imports",
            "silent",
            str(module),
        ]
    )
    lines = [line.split(": ", 1)[1] for line in out.splitlines() if ": " in line]
    revealed = [line for line in lines if line.startswith("note: Revealed type")]
    assert revealed[:5] == [
        'note: Revealed type is "django_ledger.tasks.ledger_task.LedgerTask[[user_id: '
        'int, subject: str =], bool]"',
        'note: Revealed type is "django_ledger.tasks.ledger_task.LedgerTask[[values: '
        'list[int]], int]"',
        'note: Revealed type is "django_ledger.tasks.ledger_task.LedgerTask[[day: str], None]"',
        'note: Revealed type is "django.tasks.base.TaskResult[[user_id: int, '
        'subject: str =], bool]"',
        'note: Revealed type is "django_ledger.tasks.ledger_task.LedgerTask[[user_id: '
        'int, subject: str =], bool]"',
    ], out + err
    errors = [line for line in out.splitlines() if ": error:" in line]
    assert len(errors) == 2, out
    assert '"enqueue" of "Task" has incompatible type "str"; expected "int"' in errors[0]
    assert '"enqueue" of "Task" has incompatible type "int"; expected "str"' in errors[1]
