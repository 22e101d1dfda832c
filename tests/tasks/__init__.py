"""The Django task backend: enqueue, results, the task handler and workflows of tasks."""
