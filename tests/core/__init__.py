"""The core (``django_ledger.core``): the ledger's operations on Redis, its scripts and codecs, with no Django."""
