"""The benchmarks' tasks app: nothing connected, so a task costs what the backend costs."""

from __future__ import annotations

from django.apps import AppConfig


class BenchTasksAppConfig(AppConfig):
    name = "tests.support.bench_tasks_app"
    label = "bench_tasks_app"
