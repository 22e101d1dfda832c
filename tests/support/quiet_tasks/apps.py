"""A task app with no signal receivers, for measuring the Django task path.

``tests.support.tasks_app`` connects receivers that push to Redis per signal; this one connects
none, so a worker running its ``noop`` measures the backend, not a test's receivers.
"""

from __future__ import annotations

from django.apps import AppConfig


class QuietTasksConfig(AppConfig):
    name = "tests.support.quiet_tasks"
    label = "quiet_tasks"
