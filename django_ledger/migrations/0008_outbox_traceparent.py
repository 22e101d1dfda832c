"""Outbox rows keep the W3C trace context of their enqueue, for the record they become.

The column's default ("": none) is in the database too, so a process of the version
before still stages rows.
"""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('django_ledger', '0007_outbox_kind'),
    ]

    operations = [
        migrations.AddField(
            model_name='outboxentry',
            name='traceparent',
            field=models.CharField(blank=True, db_default='', default='', max_length=55, verbose_name='traceparent'),
        ),
    ]
