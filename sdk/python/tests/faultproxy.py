"""A fault-injecting HTTP proxy in front of the real server (the twin of client/proxy_test.go).

It forwards every request unless a fault claims it, and records what it saw:
what the client got (status 0: the connection was dropped) and what the
server answered, if the request reached it.
"""

from __future__ import annotations

import http.client
import socket
import struct
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable, Optional
from urllib.parse import urlsplit

HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "content-length"}


@dataclass
class Seen:
    """One request as the proxy saw it."""

    method: str
    path: str
    key: str
    digest: str
    at: float
    #: The raw query string.
    query: str = ""
    #: What the client got (0: the connection was dropped).
    status: int = 0
    #: What the server answered, if the request reached it.
    server_status: int = 0
    retry_after: str = ""
    replayed: bool = False
    body_bytes: int = 0
    #: The server's answer body (for polls of operations).
    server_body: bytes = b""
    #: How a hold_until fault ended: "released" (its condition held) or "timed out".
    held: str = ""


Action = Callable[["FaultProxy", "Handler", Seen], None]


@dataclass
class Fault:
    match: Callable[["Handler"], bool]
    times: int
    act: Action


class TruncatedBody(Exception):
    """The client's connection ended before the whole request body came: it is never forwarded."""


@dataclass
class Forwarded:
    """The server's whole answer to a forwarded request."""

    status_code: int
    headers: dict[str, str]
    content: bytes


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: "_Server"

    def log_message(self, format: str, *args: object) -> None:  # quiet
        pass

    def handle_one_request(self) -> None:
        self._body: Optional[bytes] = None
        super().handle_one_request()

    def _any(self) -> None:
        self.server.proxy.serve(self)

    do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = do_PATCH = _any

    @property
    def url_path(self) -> str:
        return self.path.split("?", 1)[0]

    def body(self) -> bytes:
        """The whole request body (Content-Length or chunked)."""
        if self._body is not None:
            return self._body
        te = self.headers.get("Transfer-Encoding", "")
        if "chunked" in te.lower():
            out = bytearray()
            while True:
                line = self.rfile.readline()
                if not line:
                    raise TruncatedBody(f"{len(out)} bytes, then the chunked body ended early")
                size = int(line.split(b";", 1)[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    break
                out += self.rfile.read(size)
                self.rfile.readline()
            self._body = bytes(out)
        else:
            n = int(self.headers.get("Content-Length") or 0)
            self._body = self.rfile.read(n) if n else b""
            if len(self._body) < n:
                raise TruncatedBody(f"{len(self._body)} of {n} bytes")
        return self._body

    def hang_up(self, reset: bool = False) -> None:
        """Close the connection without a response (with reset: an RST, not a FIN)."""
        self.close_connection = True
        try:
            if reset:
                self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            else:
                self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        try:
            self.connection.close()
        except OSError:
            pass

    def answer(self, status: int, headers: dict[str, str], body: bytes) -> None:
        try:
            self.send_response(status)
            for k, v in headers.items():
                if k.lower() not in HOP_BY_HOP:
                    self.send_header(k, v)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True  # the client gave up on this request (a cancelled part)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    proxy: "FaultProxy"


class FaultProxy:
    """Stands between a client and the real server; see the module doc."""

    def __init__(self, target: str) -> None:
        self.target = target.rstrip("/")
        parsed = urlsplit(self.target)
        self._host, self._port = parsed.hostname or "127.0.0.1", parsed.port or 80
        self._lock = threading.Lock()
        self._faults: list[Fault] = []
        self._seen: list[Seen] = []
        self._srv = _Server(("127.0.0.1", 0), Handler)
        self._srv.proxy = self
        self.url = f"http://127.0.0.1:{self._srv.server_address[1]}"
        self._thread = threading.Thread(target=self._srv.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._srv.shutdown()
        self._srv.server_close()

    # Faults.

    def inject(self, method: str, path: str, times: int, act: Action) -> None:
        """A fault for the next times requests with this method and path (a path ending in * matches its prefix)."""

        def match(h: Handler) -> bool:
            if h.command != method:
                return False
            if path.endswith("*"):
                return h.url_path.startswith(path[:-1])
            return h.url_path == path

        self.inject_where(match, times, act)

    def inject_where(self, match: Callable[[Handler], bool], times: int, act: Action) -> None:
        with self._lock:
            self._faults.append(Fault(match, times, act))

    def clear_faults(self) -> None:
        with self._lock:
            self._faults = []

    def serve(self, h: Handler) -> None:
        rec = Seen(method=h.command, path=h.url_path, key=h.headers.get("Idempotency-Key", ""),
                   digest=h.headers.get("Content-Digest", ""), at=time.monotonic(),
                   query=h.path.split("?", 1)[1] if "?" in h.path else "")
        with self._lock:
            self._seen.append(rec)
            fault = None
            for f in self._faults:
                if f.times > 0 and f.match(h):
                    f.times -= 1
                    fault = f
                    break
        try:
            if fault is not None:
                fault.act(self, h, rec)
            else:
                forward_and_answer(self, h, rec)
        except TruncatedBody:
            h.hang_up()  # as a server would: half a request is no request

    def forward(self, h: Handler, rec: Seen) -> "Forwarded":
        """Send the request to the server on a connection of its own and return the whole response.

        The server may answer before it read the body (a replay, a 413) and
        stop reading: the answer is read even when sending the body failed.
        """
        body = h.body()
        with self._lock:
            rec.body_bytes = len(body)
        conn = http.client.HTTPConnection(self._host, self._port, timeout=60)
        try:
            conn.putrequest(h.command, h.path, skip_host=True, skip_accept_encoding=True)
            for k, v in h.headers.items():
                if k.lower() not in HOP_BY_HOP:
                    conn.putheader(k, v)
            conn.putheader("Content-Length", str(len(body)))
            conn.endheaders()
            try:
                conn.send(body)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the server stopped reading; its answer is what counts
            res = conn.getresponse()
            out = Forwarded(res.status, {k: v for k, v in res.getheaders()}, res.read())
        finally:
            conn.close()
        with self._lock:
            rec.server_status = out.status_code
            rec.retry_after = out.headers.get("Retry-After", "")
            rec.replayed = out.headers.get("Idempotent-Replayed") == "true"
            rec.server_body = out.content
        return out

    # What was seen.

    def where(self, pred: Callable[[Seen], bool]) -> list[Seen]:
        with self._lock:
            return [s for s in self._seen if pred(s)]

    def requests(self, method: str, path: str) -> list[Seen]:
        return self.where(lambda s: s.method == method and s.path == path)

    def seen(self) -> list[Seen]:
        return self.where(lambda s: True)


# Actions.


def forward_and_answer(p: FaultProxy, h: Handler, rec: Seen) -> None:
    """No fault: relay the server's answer."""
    try:
        res = p.forward(h, rec)
    except (OSError, http.client.HTTPException) as e:
        h.answer(502, {"Content-Type": "text/plain"}, f"proxy: {e}".encode())
        return
    with p._lock:  # recorded first: the client may look as soon as the answer is written
        rec.status = res.status_code
    h.answer(res.status_code, dict(res.headers), res.content)


def drop_after_commit(p: FaultProxy, h: Handler, rec: Seen) -> None:
    """Forward the request, let the server answer, then close the client's connection: the write happened, the client cannot know."""
    p.forward(h, rec)
    h.hang_up()


def drop_before_forward(p: FaultProxy, h: Handler, rec: Seen) -> None:
    """Read the request, then close the connection: the server never sees it."""
    body = h.body()
    with p._lock:
        rec.body_bytes = len(body)
    h.hang_up()


def reset_before_response(p: FaultProxy, h: Handler, rec: Seen) -> None:
    """Reset the connection (RST) after reading the request, before any response; the server never sees it."""
    body = h.body()
    with p._lock:
        rec.body_bytes = len(body)
    h.hang_up(reset=True)


def answer_problem(status: int, code: str, retry_after: str = "") -> Action:
    """Answer with a problem of this status and code after reading the whole body, as a server that failed late would."""

    def act(p: FaultProxy, h: Handler, rec: Seen) -> None:
        body = h.body()
        with p._lock:
            rec.body_bytes = len(body)
        headers = {"Content-Type": "application/problem+json", "X-Request-ID": "req_proxy"}
        if retry_after:
            headers["Retry-After"] = retry_after
        retryable = "true" if status in (408, 429) or status >= 500 else "false"
        doc = (f'{{"type":"/problems/{code}","title":"Injected","status":{status},'
               f'"detail":"injected by the test proxy","code":"{code}","retryable":{retryable},'
               f'"request_id":"req_proxy"}}')
        with p._lock:
            rec.status = status
        h.answer(status, headers, doc.encode())

    return act


def corrupt_response(p: FaultProxy, h: Handler, rec: Seen) -> None:
    """Forward the request and relay the answer with its first body byte changed, headers untouched."""
    res = p.forward(h, rec)
    body = bytes([res.content[0] ^ 0xFF]) + res.content[1:] if res.content else b""
    with p._lock:
        rec.status = res.status_code
    h.answer(res.status_code, dict(res.headers), body)


def hold_until(cond: Callable[[FaultProxy], bool], timeout: float = 20, forward: bool = True) -> Action:
    """Forward the request (or, without forward, only wait) once cond holds or after timeout."""

    def act(p: FaultProxy, h: Handler, rec: Seen) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and not cond(p):
            time.sleep(0.005)  # polling what other connections bring
        held = "released" if cond(p) else "timed out"
        with p._lock:
            rec.held = held
        if forward:
            forward_and_answer(p, h, rec)

    return act
