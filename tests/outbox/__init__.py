"""The transactional outbox: tasks enqueued with the caller's transaction, fenced effects."""
