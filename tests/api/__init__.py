"""The REST API: every route, its contract, schema, authentication and parsing."""
