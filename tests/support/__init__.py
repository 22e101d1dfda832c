"""What the tests share: fixtures, servers, helpers, worker processes, test apps and settings."""
