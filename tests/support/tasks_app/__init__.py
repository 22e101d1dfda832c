"""Task functions the task tests enqueue, and the settings their worker processes use."""
