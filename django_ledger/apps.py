from django.apps import AppConfig


class LedgerConfig(AppConfig):
    name = "django_ledger"
    label = "django_ledger"
    verbose_name = "Ledger"
    default_auto_field = "django.db.models.AutoField"
