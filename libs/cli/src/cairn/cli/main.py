"""`cairn migrate`: apply SQL migrations and declare JetStream streams, once, before services start."""

import argparse
import asyncio
import sys
from pathlib import Path

from pydantic import SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

from cairn.cli.bench import read_endpoints, report, run_ingest
from cairn.platform.migrations import apply_migrations
from cairn.platform.nats import connect, ensure_streams
from cairn.platform.settings import NatsSettings, PostgresSettings


class MigrateSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="CAIRN_", extra="ignore")

    postgres: PostgresSettings = PostgresSettings()
    nats: NatsSettings = NatsSettings()


async def migrate() -> None:
    settings = MigrateSettings()
    admin_url: SecretStr | None = settings.postgres.admin_url
    if admin_url is None:
        sys.exit("cairn migrate needs CAIRN_POSTGRES_ADMIN_URL (the owner's connection URL)")
    password = settings.postgres.app_password
    applied = await apply_migrations(admin_url.get_secret_value(), password.get_secret_value() if password else None)
    print(f"migrations applied: {', '.join(applied) or 'none (up to date)'}")
    nc = await connect(settings.nats.url, "cairn-migrate")
    try:
        streams = await ensure_streams(nc.jetstream())
    finally:
        await nc.close()
    print(f"streams declared: {', '.join(streams)}")


def main() -> None:
    parser = argparse.ArgumentParser(prog="cairn")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("migrate", help="apply SQL migrations and declare JetStream streams")
    bench = commands.add_parser("bench", help="benchmarks against a running stack (`make up`)")
    kinds = bench.add_subparsers(dest="kind", required=True)
    ingest = kinds.add_parser("ingest", help="end-to-end ingest throughput (accepted → searchable)")
    ingest.add_argument("--messages", type=int, default=5000)
    ingest.add_argument("--batch-size", type=int, default=100)
    ingest.add_argument("--endpoints", type=Path, default=Path(".cairn/endpoints.env"))
    ingest.add_argument("--out", type=Path, default=Path("bench-results/ingest.json"))
    args = parser.parse_args()
    if args.command == "migrate":
        asyncio.run(migrate())
    elif args.command == "bench":
        result = run_ingest(read_endpoints(args.endpoints), args.messages, args.batch_size)
        report(result, args.out)
