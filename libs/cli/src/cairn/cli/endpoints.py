"""Logins to the stack's servers for the CLI's benchmarks, from `endpoints.env`."""

from urllib.parse import urlsplit, urlunsplit


def postgres_as(endpoints: dict[str, str], user: str) -> str:
    """The stack's Postgres URL for another role (`postgres`, the superuser; `cairn_owner`): `endpoints.env` names
    each with its password (`CAIRN_POSTGRES_<ROLE>_URL`); a file written before passwords had only the services'."""
    named = endpoints.get(f"CAIRN_POSTGRES_{user.upper()}_URL")
    if named:
        return named
    parts = urlsplit(endpoints["CAIRN_POSTGRES_URL"])
    return urlunsplit(parts._replace(netloc=f"{user}@{parts.netloc.rpartition('@')[2]}"))
