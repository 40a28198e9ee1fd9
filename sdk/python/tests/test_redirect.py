"""Downloads straight from S3: redirect=True follows the server's 307 to a presigned URL without the token."""

from __future__ import annotations

import os
from pathlib import Path

import httpx
import pytest

import agentfs
from conftest import Bundle, sha


class Recorder(httpx.BaseTransport):
    """Notes every request's host and whether it carried Authorization."""

    def __init__(self) -> None:
        self.inner = httpx.HTTPTransport()
        self.seen: list[tuple[str, bool]] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.seen.append((f"{request.url.host}:{request.url.port}", "authorization" in request.headers))
        return self.inner.handle_request(request)


class AsyncRecorder(httpx.AsyncBaseTransport):
    def __init__(self) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.seen: list[tuple[str, bool]] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.seen.append((f"{request.url.host}:{request.url.port}", "authorization" in request.headers))
        return await self.inner.handle_async_request(request)


S3 = os.environ.get("AGENTFS_TEST_S3_ENDPOINT", "")


def test_redirect_reads_from_s3(bundle: Bundle, tmp_path: Path) -> None:
    rec = Recorder()
    with httpx.Client(transport=rec) as hc, agentfs.Client(bundle.server.url, bundle.token, http_client=hc) as c:
        v1 = c.put_file("r/report.txt", b"version one")
        f = c.put_file("r/report.txt", b"version two, longer", if_exists="replace")
        with c.file_content(f.id, redirect=True) as content:
            body = content.read()
        assert body == b"version two, longer"
        assert (content.status, content.etag, content.sha256, content.filename) == (200, f.etag, f.sha256, "report.txt")
        assert rec.seen[-1] == (S3, False), rec.seen  # the bytes came from S3, without the token

        with c.file_content(f.id, redirect=True, range="bytes=8-10", if_range=f.etag) as content:
            assert (content.read(), content.status, content.content_range) == (b"two", 206, "bytes 8-10/19")
        with c.file_content(f.id, redirect=True, range="bytes=8-10", if_range=v1.etag) as content:
            assert (content.read(), content.status) == (b"version two, longer", 200)  # stale If-Range: whole
        with c.version_content(f.id, 1, redirect=True) as content:
            assert content.read() == b"version one" and content.sha256 == sha(b"version one")

        n = c.download_file(f.id, tmp_path / "report.txt", redirect=True)
        assert n == 19 and (tmp_path / "report.txt").read_bytes() == b"version two, longer"
        assert all(not auth for host, auth in rec.seen if host == S3), rec.seen

        seen = len(rec.seen)
        with c.file_content(f.id) as content:
            assert content.read() == b"version two, longer"
        assert all(host != S3 for host, _ in rec.seen[seen:]), "a plain read went to S3"


async def test_async_redirect_reads_from_s3(bundle: Bundle) -> None:
    rec = AsyncRecorder()
    async with httpx.AsyncClient(transport=rec) as hc:
        async with agentfs.AsyncClient(bundle.server.url, bundle.token, http_client=hc) as c:
            f = await c.put_file("r/async.txt", b"async bytes")
            async with await c.file_content(f.id, redirect=True) as content:
                assert await content.aread() == b"async bytes"
                assert (content.etag, content.sha256) == (f.etag, f.sha256)
            assert rec.seen[-1] == (S3, False), rec.seen


def test_redirect_refused_by_s3(bundle: Bundle) -> None:
    """A presigned URL S3 refuses (here: tampered with) is a RedirectError naming S3's answer."""

    class Tamper(httpx.BaseTransport):
        def __init__(self) -> None:
            self.inner = httpx.HTTPTransport()

        def handle_request(self, request: httpx.Request) -> httpx.Response:
            if f"{request.url.host}:{request.url.port}" == S3:
                request.url = request.url.copy_set_param("X-Amz-Signature", "0" * 64)
            return self.inner.handle_request(request)

    with httpx.Client(transport=Tamper()) as hc, agentfs.Client(bundle.server.url, bundle.token, http_client=hc) as c:
        f = c.put_file("r/tampered.txt", b"bytes")
        with pytest.raises(agentfs.RedirectError) as e:
            c.file_content(f.id, redirect=True)
        assert e.value.status == 403, e.value
