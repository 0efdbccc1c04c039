"""NATS auth callout (ADR-26), the JWT side: how a login that no configured user matches is decided by cairn.

nats-server sends such a login to `$SYS.REQ.USER.AUTH` as an authorization request, a JWT it signs with its server
key; the answer is an authorization response, a JWT signed by the issuer account key the server was configured with
(`auth_callout { issuer: … }`), carrying either a user JWT (the login's permissions) or an error. Only what cairn
needs of the format is here: ed25519-nkey JWTs, user claims with publish and subscribe permissions, no encryption
(the callout subscription is reachable by its own user only)."""

import base64
import binascii
import hashlib
import json
import os
import time
from dataclasses import dataclass
from typing import Any

import nkeys
from nacl.exceptions import BadSignatureError
from nacl.signing import VerifyKey

AUTH_REQUESTS = "$SYS.REQ.USER.AUTH"
GLOBAL_ACCOUNT = "$G"  # the server runs without accounts: every user is in the global account
_HEADER = {"typ": "JWT", "alg": "ed25519-nkey"}
USER_JWT_S = 3600  # a login's grant; a connection keeps it until it reconnects (revoking a key ends it then)


class LoginRequestRefused(ValueError):
    """Not a request the server signed: it is answered with nothing."""


@dataclass(frozen=True)
class LoginRequest:
    user_nkey: str  # the key the server made for this connection: the answer's subject
    server_id: str  # the answer's audience
    token: str | None  # what the client sent as its token (an adapter's cairn API key)
    client_host: str | None


@dataclass(frozen=True)
class Grant:
    name: str
    publish: tuple[str, ...]
    subscribe: tuple[str, ...]


def new_issuer_seed() -> str:
    """A fresh issuer account key's seed (`SA…`); its public key (`A…`) goes into the server's configuration."""
    return str(nkeys.encode_seed(os.urandom(32), nkeys.PREFIX_BYTE_ACCOUNT).decode())


def issuer_public_key(seed: str) -> str:
    return str(nkeys.from_seed(bytearray(seed.encode())).public_key.decode())


def read_request(token: bytes) -> LoginRequest:
    """The server's authorization request, its signature checked against the server key it names."""
    try:
        head, body, signature = token.decode().split(".")
        claims = _unb64(body)
        if {k.lower(): str(v).lower() for k, v in _unb64(head).items()} != {"typ": "jwt", "alg": "ed25519-nkey"}:
            raise LoginRequestRefused("not an ed25519-nkey JWT")
        _server_key(str(claims["iss"])).verify(f"{head}.{body}".encode(), _unpad(signature))
        nats = claims["nats"]
        if nats.get("type") != "authorization_request":
            raise LoginRequestRefused(f"not an authorization request: {nats.get('type')!r}")
        options, client = nats.get("connect_opts") or {}, nats.get("client_info") or {}
        return LoginRequest(
            user_nkey=str(nats["user_nkey"]),
            server_id=str(nats["server_id"]["id"]),
            token=options.get("auth_token"),
            client_host=client.get("host"),
        )
    except (ValueError, KeyError, TypeError, AttributeError, BadSignatureError, binascii.Error) as error:
        raise LoginRequestRefused(str(error)) from error


def grant(request: LoginRequest, given: Grant, issuer_seed: str, now: float | None = None) -> bytes:
    """The authorization response that admits the login with `given`'s permissions, for `USER_JWT_S`."""
    issuer = nkeys.from_seed(bytearray(issuer_seed.encode()))
    at = int(now if now is not None else time.time())
    user = {
        "iss": issuer.public_key.decode(),
        "sub": request.user_nkey,
        "aud": GLOBAL_ACCOUNT,
        "iat": at,
        "exp": at + USER_JWT_S,
        "name": given.name,
        "nats": {
            "pub": {"allow": list(given.publish)},
            "sub": {"allow": list(given.subscribe)},
            "subs": -1,
            "data": -1,
            "payload": -1,
            "type": "user",
            "version": 2,
        },
    }
    return _response(request, issuer, at, {"jwt": _sign(user, issuer)})


def refuse(request: LoginRequest, reason: str, issuer_seed: str, now: float | None = None) -> bytes:
    """The authorization response that refuses the login; the server logs `reason`, the client sees an
    authorization violation."""
    issuer = nkeys.from_seed(bytearray(issuer_seed.encode()))
    return _response(request, issuer, int(now if now is not None else time.time()), {"error": reason})


def _response(request: LoginRequest, issuer: nkeys.KeyPair, at: int, outcome: dict[str, object]) -> bytes:
    claims = {
        "iss": issuer.public_key.decode(),
        "sub": request.user_nkey,
        "aud": request.server_id,
        "iat": at,
        "nats": {**outcome, "type": "authorization_response", "version": 2},
    }
    return _sign(claims, issuer).encode()


def _sign(claims: dict[str, object], key: nkeys.KeyPair) -> str:
    claims = {**claims, "jti": ""}
    claims["jti"] = base64.b32encode(hashlib.sha256(_json(claims)).digest()).decode().rstrip("=")
    signing_input = f"{_b64(_json(_HEADER))}.{_b64(_json(claims))}"
    return f"{signing_input}.{_b64(key.sign(signing_input.encode()))}"


def _server_key(public: str) -> VerifyKey:
    """A server's public nkey (`N…`: base32 of a prefix byte, 32 key bytes and a CRC16) as a verifying key."""
    raw = base64.b32decode(public + "=" * (-len(public) % 8))
    if len(raw) != 35 or raw[0] != nkeys.PREFIX_BYTE_SERVER:
        raise LoginRequestRefused("the request is not signed by a server key")
    if int.from_bytes(raw[-2:], "little") != nkeys.crc16(raw[:-2]):
        raise LoginRequestRefused("the server key's checksum does not match")
    return VerifyKey(raw[1:33])


def _json(value: object) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unpad(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _unb64(text: str) -> dict[str, Any]:
    value = json.loads(_unpad(text))
    if not isinstance(value, dict):
        raise LoginRequestRefused("a JWT part is not an object")
    return value
