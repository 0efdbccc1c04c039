"""The ingest service: the only write door. Validates, authenticates and publishes commands as events."""
