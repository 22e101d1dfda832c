"""The ``LEDGER`` setting, its system checks, and the connections it names."""
