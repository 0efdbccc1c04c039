"""Shared plumbing for cairn's services: settings pieces, Postgres, NATS, Redis, telemetry, HTTP."""
