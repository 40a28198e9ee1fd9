"""Reading a response the server sent before it read the whole request body.

AgentFS answers some requests without reading their body: a replay or a
conflict of a write that declared its Content-Digest, OPERATION_IN_PROGRESS,
413, 401. The server then stops reading, and the client's write fails. The
answer is in the socket all the same, and it matters: a replay is the
outcome of the write, OPERATION_IN_PROGRESS says to poll the key.

httpcore reads that answer from 0.17.1 on. Older releases (Debian 12 ships
httpcore 0.16.3 with httpx 0.23) give up with a WriteError, so a replay of a
large part would look like a broken connection forever. For those releases
only, this module makes the HTTP/1.1 connection do what newer ones do: on a
failed body write, go on to read the response. Nothing changes on newer
releases.
"""

from __future__ import annotations

import re
from typing import Any


def _version(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", v)[:3])


def read_early_responses() -> bool:
    """Backport the read-after-write-error of httpcore 0.17.1 to older releases; True when applied."""
    try:
        import httpcore
        from httpcore._async import http11 as async_http11
        from httpcore._sync import http11 as sync_http11
    except ImportError:  # pragma: no cover - httpx always brings httpcore
        return False
    if _version(getattr(httpcore, "__version__", "0")) >= (0, 17, 1):
        return False
    sync_conn: Any = sync_http11.HTTP11Connection
    async_conn: Any = async_http11.AsyncHTTP11Connection
    if getattr(sync_conn, "_agentfs_reads_early_responses", False):
        return True
    send_sync = sync_conn._send_request_body
    send_async = async_conn._send_request_body

    def _send_request_body(self: Any, request: Any) -> None:
        try:
            send_sync(self, request)
        except httpcore.WriteError:
            pass  # the server stopped reading: its answer may be waiting, read it

    async def _send_request_body_async(self: Any, request: Any) -> None:
        try:
            await send_async(self, request)
        except httpcore.WriteError:
            pass

    sync_conn._send_request_body = _send_request_body
    async_conn._send_request_body = _send_request_body_async
    sync_conn._agentfs_reads_early_responses = True
    return True
