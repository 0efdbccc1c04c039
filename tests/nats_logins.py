"""A NATS login spoken in the protocol itself (nats-py leaves a refused connection's socket open, which pytest reports
as an unclosed resource): CONNECT with the given credentials, then PING."""

import asyncio
import json


async def login_answer(port: int, login: dict[str, str]) -> str:
    """The server's first answer: `PONG` when the login is taken, `-ERR 'Authorization Violation'` when not."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        async with asyncio.timeout(10):
            await reader.readline()  # INFO {...}
            connect = {"verbose": False, "pedantic": False, "protocol": 1, **login}
            writer.write(f"CONNECT {json.dumps(connect)}\r\nPING\r\n".encode())
            await writer.drain()
            return (await reader.readline()).decode().strip()
    finally:
        writer.close()
        await writer.wait_closed()
