"""The worker: its runtime in-process and ``manage.py ledger_worker`` as real processes."""
