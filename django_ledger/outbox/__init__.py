"""The transactional outbox and fenced effects: a task exists iff its transaction committed.

``models`` holds the two tables (``OutboxEntry``, ``TaskEffect``); ``staging`` writes an
enqueue's rows in the caller's transaction and admits them on commit; ``delivery``
admits rows (the committer's and the relay's shared step); ``effects`` is the fenced
effects helper. ``docs/transactions.md`` is the guide.
"""
