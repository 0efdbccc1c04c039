"""`cairn migrate`: apply SQL migrations and declare JetStream streams, once, before services start."""

import argparse
import asyncio
import sys

from pydantic import SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

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
    args = parser.parse_args()
    if args.command == "migrate":
        asyncio.run(migrate())
