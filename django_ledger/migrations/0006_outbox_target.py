"""Outbox rows say where they are meant to go (docs/transactions.md, "Several deployments").

Rows written before keep the target "" and stay deliverable by any relay, as before; the
column's default is in the database too, so a process of the version before (a rolling
deploy) still stages rows. The index is the relay's walk: a target's rows, oldest first.
"""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('django_ledger', '0005_queue_limit_permission'),
    ]

    operations = [
        migrations.AddField(
            model_name='outboxentry',
            name='target',
            field=models.CharField(blank=True, db_default='', default='', max_length=255, verbose_name='target'),
        ),
        migrations.AddIndex(
            model_name='outboxentry',
            index=models.Index(fields=['target', 'created_at', 'id'], name='django_ledger_outbox_relay'),
        ),
    ]
