"""The ledger admin: its pages with Django's test client, and in a real browser."""
