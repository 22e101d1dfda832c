"""The transactional outbox and fenced effects: a task exists iff its transaction committed.

``models`` holds the two tables (``OutboxEntry``, whose ``kind`` says what a row carries,
and ``TaskEffect``); ``staging`` writes rows in the caller's transaction and has them
admitted on commit; ``delivery`` admits rows by their kind (the committer's and the
relay's shared step), a workflow's through ``workflow_rows``; ``effects`` is the fenced
effects' compare-and-set. The outbox imports nothing of ``tasks``: the task side
(``tasks/staged.py``, ``tasks/fencing.py``) is built on it. ``docs/transactions.md`` is
the guide.
"""
