"""A tasks app for benchmarks: one no-op task and no signal receivers of its own."""
