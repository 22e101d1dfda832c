"""The permission to change a queue's flow limits (docs/limits.md)."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("django_ledger", "0004_outbox"),
    ]

    operations = [
        migrations.AlterModelOptions(
            name="queue",
            options={
                "default_permissions": ("view",),
                "permissions": [
                    ("operate_queue", "Can close and open queue gates"),
                    ("limit_queue", "Can change queue flow limits"),
                ],
                "verbose_name": "queue",
                "verbose_name_plural": "queues",
            },
        ),
    ]
