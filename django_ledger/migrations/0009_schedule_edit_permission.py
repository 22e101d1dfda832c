"""The permission to create, edit and delete run-time schedules (docs/scheduler.md)."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("django_ledger", "0008_outbox_traceparent"),
    ]

    operations = [
        migrations.AlterModelOptions(
            name="schedule",
            options={
                "default_permissions": ("view",),
                "permissions": [
                    ("operate_schedule", "Can pause, resume and trigger schedules"),
                    ("edit_schedule", "Can create, edit and delete run-time schedules"),
                ],
                "verbose_name": "schedule",
                "verbose_name_plural": "schedules",
            },
        ),
    ]
