"""Adapters that publish to NATS themselves log in with their tenant's API key, and may then publish only into their
own tenant's inbox (`cairn.in.<tenant>.message`): nats-server asks cairn about every login that no configured user
matches (auth callout, `cairn.delivery.nats_logins`), and this background task answers, from the same keys that
authenticate HTTP requests (one with the `write` scope, for every agent). No key, or an unknown one, is refused;
an adapter can never write in another tenant's name, and nobody without a key can write at all.

It runs in ingest (the keys' owner) when `CAIRN_NATS_LOGINS_URL` (its own NATS user, allowed to answer on
`$SYS.REQ.USER.AUTH` only) and `CAIRN_NATS_ISSUER_SEED` (the key the server trusts for the answers) are set."""

import asyncio
import logging

from nats.aio.client import Client
from nats.aio.msg import Msg

from cairn.delivery.nats import connect
from cairn.delivery.nats_logins import AUTH_REQUESTS, Grant, LoginRequestRefused, grant, read_request, refuse
from cairn.edge.auth import ApiKeys, KeyGrant
from cairn.events.streams import inbound_subject

log = logging.getLogger(__name__)


def adapter_grant(tenant: str) -> Grant:
    """What an adapter of `tenant` may do: publish into its inbox and receive JetStream's acks."""
    return Grant(name=f"adapter:{tenant}", publish=(inbound_subject(tenant),), subscribe=("_INBOX.>",))


class AdapterLogins:
    consumer = "adapter-logins"
    stream = "-"

    def __init__(self, url: str, issuer_seed: str, keys: ApiKeys) -> None:
        self._url, self._seed, self._keys = url, issuer_seed, keys

    async def run(self) -> None:
        nc: Client = await connect(self._url, "cairn-ingest-logins")
        try:
            await nc.subscribe(AUTH_REQUESTS, queue="cairn-adapter-logins", cb=self._answer)
            await nc.flush()
            await asyncio.Event().wait()  # answering in the subscription's callback, until cancelled
        finally:
            await nc.close()

    async def _answer(self, msg: Msg) -> None:
        try:
            request = read_request(msg.data)
        except LoginRequestRefused as error:
            log.warning("an auth request not signed by a server was ignored: %s", error)
            return
        key = await self._keys.key_for(request.token) if request.token else None
        why = refusal(key, bool(request.token))
        if key is None or why is not None:
            await msg.respond(refuse(request, why or "not a valid API key", self._seed))
            return
        await msg.respond(grant(request, adapter_grant(key.tenant), self._seed))


def refusal(key: KeyGrant | None, sent: bool) -> str | None:
    """Why a login is refused, or None: a key that may write messages, for every agent of its tenant (a message
    names its agent inside, where the login cannot see it, so a key limited to some agents posts over HTTP)."""
    if key is None:
        return "not a valid API key" if sent else "no API key"
    if key.expired():
        return "the API key has expired"
    if "write" not in key.scopes:
        return "the API key lacks the write scope"
    if key.agents is not None:
        return "the API key is limited to some agents; NATS logins need one for every agent"
    return None
