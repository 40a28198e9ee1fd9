"""One logical request and its body, the same on every attempt."""

from __future__ import annotations

import asyncio
import io
import os
import re
import secrets
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, BinaryIO, Callable, Iterator, Optional, Union
from urllib.parse import quote

from ._errors import AgentFSError
from ._retry import Call

__all__ = ["Request", "Body", "make_body", "new_idempotency_key", "NOT_GIVEN", "NotGiven"]

#: Bytes read from a local file per chunk sent.
CHUNK = 1 << 20


class NotGiven:
    """The type of NOT_GIVEN: an argument left out, unlike an explicit None."""

    _instance: Optional["NotGiven"] = None

    def __new__(cls) -> "NotGiven":
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __bool__(self) -> bool:
        return False

    def __repr__(self) -> str:
        return "NOT_GIVEN"


#: Marks an argument the caller did not pass (None means "send none").
NOT_GIVEN = NotGiven()

_TAG = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:/=+@-]{0,127}$")
_KEY = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$")


def check_tag(what: str, v: Optional[str]) -> Optional[str]:
    """Check an X-Agent-ID or X-Run-ID value (the X-Agent-ID/X-Run-ID syntax) before anything is sent."""
    if v is None:
        return None
    if not isinstance(v, str) or not _TAG.match(v):
        raise ValueError(
            f"{what} {v!r}: want 1-128 characters of A-Z a-z 0-9 . _ : / = + @ -, starting with a letter or digit"
        )
    return v


def check_key(v: Optional[str]) -> Optional[str]:
    """Check a caller's Idempotency-Key (the idempotency rules) before anything is sent."""
    if v is None:
        return None
    if not isinstance(v, str) or not _KEY.match(v):
        raise ValueError(f"idempotency key {v!r}: want ^[A-Za-z0-9][A-Za-z0-9._:-]{{0,127}}$")
    return v


def new_idempotency_key() -> str:
    """A new random Idempotency-Key, for a caller that wants to keep the key of a write.

    Keep it to repeat the write from another process: the same key and
    request always get the first outcome, within the server's retention.
    """
    return "afs-" + secrets.token_hex(16)


def escape(segment: str) -> str:
    """Escape one path segment of a URL."""
    return quote(segment, safe="")


class Observer:
    """Told what each attempt of a body sends (upload progress)."""

    def restart(self) -> None:
        """A new attempt starts: what the last one sent is to be sent again."""

    def add(self, n: int) -> None:
        """n more bytes were handed to the connection."""


class Body:
    """A request body that may be sent more than once.

    ``size`` is its length, None when unknown (sent chunked). A body that is
    not rewindable (a stream) is sent once: once an attempt has read from it,
    it is ``lost`` for every later one.
    """

    size: Optional[int] = None
    rewindable: bool = True

    def __init__(self) -> None:
        self.used = False
        self.observer: Optional[Observer] = None

    def lost(self) -> bool:
        """Whether an attempt read from a body that cannot be read again."""
        return self.used and not self.rewindable

    def _sync_chunks(self) -> Iterator[bytes]:
        raise NotImplementedError

    async def _async_chunks(self) -> AsyncIterator[bytes]:
        for chunk in self._sync_chunks():
            yield chunk

    def sync_content(self) -> Union[bytes, Iterator[bytes]]:
        """The content of one attempt, for httpx.Client."""
        if self.size == 0:
            return b""
        attempt = _Attempt(self)

        def gen() -> Iterator[bytes]:
            for chunk in self._sync_chunks():
                if chunk:
                    yield attempt.take(chunk)
            attempt.end()

        return gen()

    def async_content(self) -> Union[bytes, AsyncIterator[bytes]]:
        """The content of one attempt, for httpx.AsyncClient."""
        if self.size == 0:
            return b""
        attempt = _Attempt(self)

        async def gen() -> AsyncIterator[bytes]:
            async for chunk in self._async_chunks():
                if chunk:
                    yield attempt.take(chunk)
            attempt.end()

        return gen()


class _Attempt:
    """What one attempt of a body has sent: marks the body used, holds it to its size, tells the observer."""

    def __init__(self, body: Body) -> None:
        self.body = body
        self.sent = 0
        self.observer = body.observer
        if self.observer:
            self.observer.restart()

    def take(self, chunk: Any) -> bytes:
        """Account for one non-empty chunk about to be sent; returns it as bytes."""
        self.body.used = True
        self.sent += len(chunk)
        self._check_size(final=False)
        if self.observer:
            self.observer.add(len(chunk))
        return bytes(chunk)

    def end(self) -> None:
        """The body ended: it must have held exactly its size."""
        self._check_size(final=True)

    def _check_size(self, *, final: bool) -> None:
        size, sent = self.body.size, self.sent
        if size is None:
            return
        if sent > size or (final and sent != size):
            raise AgentFSError(f"the request body held {'more than ' if not final else ''}{sent} bytes, not {size}")


class BytesBody(Body):
    """Bytes in memory: sent with their length, again whole on every attempt."""

    def __init__(self, data: bytes) -> None:
        super().__init__()
        self.data = data
        self.size = len(data)

    def _sync_chunks(self) -> Iterator[bytes]:
        view = memoryview(self.data)
        for i in range(0, len(view), CHUNK):
            yield view[i : i + CHUNK]

    def sync_content(self) -> Union[bytes, Iterator[bytes]]:
        if self.observer is None:
            return self.data
        return super().sync_content()

    def async_content(self) -> Union[bytes, AsyncIterator[bytes]]:
        if self.observer is None:
            return self.data
        return super().async_content()


class PathBody(Body):
    """size bytes of a local file from offset: opened again for every attempt, read as it is sent."""

    def __init__(self, path: str, offset: int = 0, size: Optional[int] = None) -> None:
        super().__init__()
        self.path = path
        self.offset = offset
        self.size = os.stat(path).st_size - offset if size is None else size

    def _sync_chunks(self) -> Iterator[bytes]:
        with open(self.path, "rb") as f:
            f.seek(self.offset)
            yield from _read_section(f, self.size or 0)

    async def _async_chunks(self) -> AsyncIterator[bytes]:
        f = await asyncio.to_thread(_open_binary, self.path)
        try:
            await asyncio.to_thread(f.seek, self.offset)
            async for chunk in _aread_section(f, self.size or 0):
                yield chunk
        finally:
            f.close()


class SeekableFileBody(Body):
    """A seekable binary file object: sent from its current offset with its length, rewound for every attempt."""

    def __init__(self, f: Any, start: int, size: int) -> None:
        super().__init__()
        self.f, self.start, self.size = f, start, size

    def _sync_chunks(self) -> Iterator[bytes]:
        self.f.seek(self.start)
        yield from _read_section(self.f, self.size or 0)

    async def _async_chunks(self) -> AsyncIterator[bytes]:
        await asyncio.to_thread(self.f.seek, self.start)
        async for chunk in _aread_section(self.f, self.size or 0):
            yield chunk


class StreamBody(Body):
    """An iterator, async iterator or unseekable reader: sent once, chunked unless its size is given."""

    rewindable = False

    def __init__(self, source: Any, size: Optional[int]) -> None:
        super().__init__()
        self.source, self.size = source, size

    def _sync_chunks(self) -> Iterator[bytes]:
        if hasattr(self.source, "__aiter__") and not hasattr(self.source, "__iter__"):
            raise TypeError("an async iterator can only be sent by AsyncClient")
        yield from _iter_source(self.source)

    async def _async_chunks(self) -> AsyncIterator[bytes]:
        if hasattr(self.source, "__aiter__"):
            async for chunk in self.source:
                yield chunk
            return
        if hasattr(self.source, "read"):
            while True:
                chunk = await asyncio.to_thread(self.source.read, CHUNK)
                if not chunk:
                    return
                yield chunk
        for chunk in self.source:
            yield chunk


class FactoryBody(Body):
    """A function that returns fresh content (bytes or an iterator) for every attempt."""

    def __init__(self, factory: Callable[[], Any], size: Optional[int]) -> None:
        super().__init__()
        self.factory, self.size = factory, size

    def _sync_chunks(self) -> Iterator[bytes]:
        yield from _iter_source(self.factory())

    async def _async_chunks(self) -> AsyncIterator[bytes]:
        src = self.factory()
        if hasattr(src, "__aiter__"):
            async for chunk in src:
                yield chunk
            return
        for chunk in _iter_source(src):
            yield chunk


def _open_binary(path: str) -> BinaryIO:
    return open(path, "rb")


def _read_section(f: Any, left: int) -> Iterator[bytes]:
    """Up to left bytes of a binary file from where it stands, CHUNK at a time (fewer if it ends first)."""
    while left > 0:
        chunk = f.read(min(CHUNK, left))
        if not chunk:
            return
        left -= len(chunk)
        yield chunk


async def _aread_section(f: Any, left: int) -> AsyncIterator[bytes]:
    """_read_section with every read on a worker thread."""
    while left > 0:
        chunk = await asyncio.to_thread(f.read, min(CHUNK, left))
        if not chunk:
            return
        left -= len(chunk)
        yield chunk


def _iter_source(src: Any) -> Iterator[bytes]:
    if isinstance(src, (bytes, bytearray, memoryview)):
        yield bytes(src)
        return
    if hasattr(src, "read"):
        while True:
            chunk = src.read(CHUNK)
            if not chunk:
                return
            yield chunk
    for chunk in src:
        if isinstance(chunk, str):
            raise TypeError("the body iterator yielded str; yield bytes")
        yield chunk


#: What put_file and upload_part accept as content.
Content = Any


def make_body(content: Content, size: Optional[int] = None) -> Body:
    """Wrap what the caller passed as a request body.

    bytes are sent whole; a pathlib.Path (any os.PathLike) is a local file,
    streamed; a seekable binary file streams from its current offset and is
    rewound for a retry; an iterator (or an unseekable reader) streams once;
    a function returning bytes or an iterator is called again for each attempt.
    """
    if isinstance(content, Body):
        return content
    if isinstance(content, (bytes, bytearray, memoryview)):
        return BytesBody(bytes(content))
    if isinstance(content, str):
        raise TypeError(
            "content is a str: pass bytes (text.encode()) for content, or a pathlib.Path for a local file"
        )
    if isinstance(content, os.PathLike):
        p = os.fspath(content)
        if isinstance(p, bytes):
            p = os.fsdecode(p)
        st = os.stat(p)
        if not _is_regular(st.st_mode):
            raise ValueError(f"{p} is not a regular file")
        return PathBody(p, 0, st.st_size if size is None else size)
    if isinstance(content, io.TextIOBase):
        raise TypeError("content is a text file: open it in binary mode ('rb')")
    if hasattr(content, "read"):
        seekable = getattr(content, "seekable", None)
        if seekable is not None and _call_quietly(seekable):
            try:
                start = content.tell()
                content.seek(0, io.SEEK_END)
                end = content.tell()
                content.seek(start)
            except (OSError, ValueError, AttributeError):
                return StreamBody(content, size)
            return SeekableFileBody(content, start, end - start if size is None else size)
        return StreamBody(content, size)
    if callable(content):
        return FactoryBody(content, size)
    if hasattr(content, "__iter__") or hasattr(content, "__aiter__"):
        return StreamBody(content, size)
    raise TypeError(f"cannot send {type(content).__name__} as a body: pass bytes, a path, a file or an iterator")


def _is_regular(mode: int) -> bool:
    import stat

    return stat.S_ISREG(mode)


def _call_quietly(fn: Callable[[], Any]) -> bool:
    try:
        return bool(fn())
    except (OSError, ValueError):
        return False


@dataclass
class Request:
    """One logical call: the same request is sent on every attempt."""

    method: str
    #: Escaped, under the base URL.
    path: str
    route: str
    query: dict[str, str] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)
    #: Idempotency-Key, None for none.
    key: Optional[str] = None
    body: Optional[Body] = None
    #: An upload with if_exists=replace (safe to repeat without a key).
    replace: bool = False
    #: Per-call attribution: NOT_GIVEN keeps the client's, None sends none.
    agent_id: Any = NOT_GIVEN
    run_id: Any = NOT_GIVEN
    #: Seconds, for a request that may take long (a batch with wait); None: the client's.
    timeout: Optional[float] = None

    @property
    def call(self) -> Call:
        """What the retry classification knows of this request."""
        return Call(self.route, keyed=bool(self.key), replace=self.replace)

    def body_lost(self) -> bool:
        """Whether an attempt read a body that cannot be sent again."""
        return self.body is not None and self.body.lost()


def route_request(route: str, path: str, **kw: Any) -> Request:
    """A Request for route ("POST /v1/files") at the escaped path."""
    method = route.split(" ", 1)[0]
    return Request(method=method, path=path, route=route, **kw)
