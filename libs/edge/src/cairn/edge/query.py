"""Empty query parameters count as absent: API.md writes its query strings as templates
(`?agent_id=&prefix=`), and a client that sends one as written means "the default", not "an empty
value". Without this, `agent_id=` would fail its pattern instead of defaulting to `main`."""

from starlette.types import ASGIApp, Receive, Scope, Send


def without_empty_values(query_string: bytes) -> bytes:
    """The query string without `name=` (and bare `name`) pairs; every other pair is kept byte for byte."""
    pairs = [pair for pair in query_string.split(b"&") if pair.partition(b"=")[2]]
    return b"&".join(pairs)


class EmptyQueryParamsAreAbsent:
    """ASGI middleware applying `without_empty_values` to every HTTP request."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope.get("query_string"):
            scope = {**scope, "query_string": without_empty_values(scope["query_string"])}
        await self.app(scope, receive, send)
