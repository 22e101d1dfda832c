"""Outbox rows say what they carry (a task, a workflow) in a column of their own.

The delivery reads the column, never the payload. Rows written before are marked here
from their payload: a workflow's starts with ``{"workflow":``, a task's with
``{"args":``. The column's default (``task``) is in the database too, so a process of
the version before still stages task rows.
"""

from django.apps.registry import Apps
from django.db import migrations, models
from django.db.backends.base.schema import BaseDatabaseSchemaEditor

#: How a workflow row's payload starts (``outbox/workflow_rows.py``), as written before.
WORKFLOW_PAYLOAD_START = '{"workflow":'


def mark_workflow_rows(apps: Apps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    entries = apps.get_model("django_ledger", "OutboxEntry").objects.using(
        schema_editor.connection.alias
    )
    entries.filter(payload__startswith=WORKFLOW_PAYLOAD_START).update(kind="workflow")


class Migration(migrations.Migration):

    dependencies = [
        ('django_ledger', '0006_outbox_target'),
    ]

    operations = [
        migrations.AddField(
            model_name='outboxentry',
            name='kind',
            field=models.CharField(choices=[('task', 'task'), ('workflow', 'workflow')], db_default='task', default='task', max_length=16, verbose_name='kind'),
        ),
        migrations.RunPython(mark_workflow_rows, migrations.RunPython.noop, elidable=True),
    ]
