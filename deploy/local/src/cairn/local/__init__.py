"""The embedded local stack: real NATS (JetStream), PostgreSQL + pgvector and Redis on 127.0.0.1,
plus the five services as processes, with all data under one folder."""

from cairn.local.stack import LocalStack, StackState

__all__ = ["LocalStack", "StackState"]
