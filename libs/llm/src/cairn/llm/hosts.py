"""Where a tenant's model override may point: only at hosts the operator listed (`CAIRN_LLM_ALLOWED_HOSTS`).

The service calls the override's URL from inside the cluster, so an unchecked URL would let a tenant make it
call anything it can reach (the cloud metadata address, internal services): server-side request forgery. The
check is on the host httpx will connect to, parsed, never on the text: `http://allowed.example@169.254.169.254/`
connects to 169.254.169.254, `http://169.254.169.254#allowed.example` too. A URL the two parsers (urllib's and
httpx's) read differently is refused, as is anything beyond scheme, host, port and path. Names are compared
exactly after lowercasing and dropping one trailing dot; IP addresses in their canonical form. What a listed
name resolves to is the operator's DNS: list names you control, or IPs.
"""

import ipaddress
from urllib.parse import urlsplit

import httpx

SCHEMES = ("http", "https")


def canonical_host(host: str) -> str:
    """`LLM.Example.` → `llm.example`, `[::1]` and `0:0::1` → `::1`."""
    host = host.strip().lower().removeprefix("[").removesuffix("]").removesuffix(".")
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        return host


def override_refusal(base_url: str, allowed_hosts: list[str]) -> str | None:
    """None when a tenant may use `base_url`, else the rule it breaks, as a 422's field message ("must ...")."""
    allowed = {canonical_host(host) for host in allowed_hosts if host.strip()}
    if not allowed:
        return (
            "must point at a host on this deployment's allow-list, which is empty (CAIRN_LLM_ALLOWED_HOSTS): "
            "no model overrides are allowed"
        )
    host = _parsed_host(base_url)
    if isinstance(host, _Refusal):
        return host.reason
    if host not in allowed:
        shown = host[:100]
        return f"must point at a host on this deployment's allow-list (CAIRN_LLM_ALLOWED_HOSTS); {shown!r} is not on it"
    return None


class _Refusal:
    def __init__(self, reason: str) -> None:
        self.reason = reason


def _parsed_host(base_url: str) -> "str | _Refusal":
    if any(ord(c) <= 0x20 or ord(c) == 0x7F or c == "\\" for c in base_url):
        return _Refusal("must not contain spaces, control characters or backslashes")
    try:
        split = urlsplit(base_url)
        split.port  # noqa: B018  (raises on a port that is not a number in range)
        url = httpx.URL(base_url)
    except (ValueError, httpx.InvalidURL) as error:  # UnicodeError is a ValueError
        return _Refusal(f"must be a valid URL: {error}")
    if split.scheme.lower() not in SCHEMES or url.scheme not in SCHEMES:
        return _Refusal("must be an http or https URL")
    if split.username is not None or split.password is not None or "@" in split.netloc or url.userinfo:
        return _Refusal("must not carry a user name or password")
    if split.query or split.fragment or "?" in base_url or "#" in base_url:
        return _Refusal("must not carry a query or a fragment")
    # raw_host: the ASCII form httpx connects to (an internationalized name as its punycode).
    if not split.hostname or not url.raw_host:
        return _Refusal("must name a host")
    host = canonical_host(url.raw_host.decode("ascii"))
    if canonical_host(split.hostname) != host:
        return _Refusal("must name one host, read the same by every URL parser")
    return host
