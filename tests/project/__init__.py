"""The project as a user meets it: packaging, docs, README, demo, layering, dependency floors."""
