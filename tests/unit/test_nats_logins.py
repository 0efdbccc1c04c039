"""The JWT side of NATS auth callout (`cairn.delivery.nats_logins`): a request is read only when a server key signed
it; a grant is a user JWT for the request's connection key with exactly the given permissions, signed by the issuer."""

import base64
import json
import os

import nkeys
import pytest
from nacl.signing import VerifyKey

from cairn.delivery.nats_logins import (
    GLOBAL_ACCOUNT,
    Grant,
    LoginRequest,
    LoginRequestRefused,
    grant,
    issuer_public_key,
    new_issuer_seed,
    read_request,
    refuse,
)

USER_NKEY = "UCONNECTIONKEY"


def _b64(value: object) -> str:
    return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()


def _parts(token: str) -> tuple[dict[str, object], dict[str, object], bytes, str]:
    head, body, signature = token.split(".")
    return json.loads(_unpad(head)), json.loads(_unpad(body)), _unpad(signature), f"{head}.{body}"


def _unpad(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _signed_request(prefix: int, token: str | None = "ck_key", tamper: bool = False) -> bytes:
    key = nkeys.from_seed(bytearray(nkeys.encode_seed(os.urandom(32), prefix)))
    claims = {
        "iss": key.public_key.decode(),
        "nats": {
            "type": "authorization_request",
            "user_nkey": USER_NKEY,
            "server_id": {"id": "NSERVERID"},
            "connect_opts": {"auth_token": token} if token else {},
            "client_info": {"host": "10.0.0.7"},
        },
    }
    signing_input = f"{_b64({'typ': 'JWT', 'alg': 'ed25519-nkey'})}.{_b64(claims)}"
    signature = key.sign(signing_input.encode())
    if tamper:
        signing_input = f"{_b64({'typ': 'JWT', 'alg': 'ed25519-nkey'})}.{_b64({**claims, 'sub': 'someone else'})}"
    return f"{signing_input}.{base64.urlsafe_b64encode(signature).rstrip(b'=').decode()}".encode()


def test_a_request_a_server_signed_is_read() -> None:
    request = read_request(_signed_request(nkeys.PREFIX_BYTE_SERVER))
    assert request == LoginRequest(user_nkey=USER_NKEY, server_id="NSERVERID", token="ck_key", client_host="10.0.0.7")
    assert read_request(_signed_request(nkeys.PREFIX_BYTE_SERVER, token=None)).token is None


@pytest.mark.parametrize(
    "token",
    [_signed_request(nkeys.PREFIX_BYTE_ACCOUNT), _signed_request(nkeys.PREFIX_BYTE_USER),
     _signed_request(nkeys.PREFIX_BYTE_SERVER, tamper=True), b"not.a.jwt", b"garbage"],
    ids=["an account key", "a user key", "a changed body", "three dots", "no JWT"],
)  # fmt: skip
def test_a_request_no_server_signed_is_refused(token: bytes) -> None:
    with pytest.raises(LoginRequestRefused):
        read_request(token)


def test_a_grant_is_a_user_jwt_with_exactly_the_given_permissions_signed_by_the_issuer() -> None:
    seed = new_issuer_seed()
    request = read_request(_signed_request(nkeys.PREFIX_BYTE_SERVER))
    given = Grant(name="adapter:t1", publish=("cairn.in.t1.message",), subscribe=("_INBOX.>",))

    header, response, signature, signed = _parts(grant(request, given, seed, now=1_000).decode())

    issuer = issuer_public_key(seed)
    _verify(issuer, signed, signature)
    assert header == {"typ": "JWT", "alg": "ed25519-nkey"}
    assert (response["iss"], response["sub"], response["aud"]) == (issuer, USER_NKEY, "NSERVERID")
    nats = response["nats"]
    assert isinstance(nats, dict)
    assert nats["type"] == "authorization_response"
    _, user, user_signature, user_signed = _parts(nats["jwt"])
    _verify(issuer, user_signed, user_signature)
    assert (user["sub"], user["aud"], user["exp"]) == (USER_NKEY, GLOBAL_ACCOUNT, 1_000 + 3600)
    assert user["nats"] == {
        "pub": {"allow": ["cairn.in.t1.message"]},
        "sub": {"allow": ["_INBOX.>"]},
        "subs": -1,
        "data": -1,
        "payload": -1,
        "type": "user",
        "version": 2,
    }


def test_a_refusal_carries_the_reason_and_no_user() -> None:
    seed = new_issuer_seed()
    request = read_request(_signed_request(nkeys.PREFIX_BYTE_SERVER))
    _, response, signature, signed = _parts(refuse(request, "not a valid API key", seed).decode())
    _verify(issuer_public_key(seed), signed, signature)
    assert response["nats"] == {"error": "not a valid API key", "type": "authorization_response", "version": 2}


def _verify(public: str, signed: str, signature: bytes) -> None:
    raw = base64.b32decode(public + "=" * (-len(public) % 8))
    VerifyKey(raw[1:33]).verify(signed.encode(), signature)
