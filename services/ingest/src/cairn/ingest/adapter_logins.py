"""Adapters that publish to NATS themselves log in with their tenant's API key, and may then publish only into their
own tenant's inbox (`cairn.in.<tenant>.message`): nats-server asks cairn about every login that no configured user
matches (auth callout, `cairn.delivery.nats_logins`), and this background task answers, from the same keys that
authenticate HTTP requests. No key, or an unknown one, is refused; an adapter can never write in another tenant's
name, and nobody without a key can write at all.

It runs in ingest (the keys' owner) when `CAIRN_NATS_LOGINS_URL` (its own NATS user, allowed to answer on
`$SYS.REQ.USER.AUTH` only) and `CAIRN_NATS_ISSUER_SEED` (the key the server trusts for the answers) are set."""

import asyncio
import logging

from nats.aio.client import Client
from nats.aio.msg import Msg

from cairn.delivery.nats import connect
from cairn.delivery.nats_logins import AUTH_REQUESTS, Grant, LoginRequestRefused, grant, read_request, refuse
from cairn.edge.auth import ApiKeys
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
        tenant = await self._keys.tenant_for(request.token) if request.token else None
        if tenant is None:
            why = "no API key" if not request.token else "not a valid API key"
            await msg.respond(refuse(request, why, self._seed))
            return
        await msg.respond(grant(request, adapter_grant(tenant), self._seed))
