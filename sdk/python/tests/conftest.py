"""The real AgentFS server for the SDK tests.

The session builds bin/agentfs, gives it a fresh database on the test
Postgres and a fresh bucket on the test S3 server that `make test` starts
(AGENTFS_TEST_DATABASE_URL, AGENTFS_TEST_S3_*), runs `agentfs serve` on a
free port, creates tokens with `agentfs token create`, and stops it all at
the end. Without those servers every test fails with a message saying to
run `make test`.
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator, Optional
from urllib.parse import urlsplit, urlunsplit

import httpx
import pytest

import agentfs

sys.path.insert(0, str(Path(__file__).parent))

from faultproxy import FaultProxy  # noqa: E402

HOW_TO_START = (
    "start the test servers with `make test` (it starts a throwaway Postgres and S3 server, "
    "exports AGENTFS_TEST_DATABASE_URL and AGENTFS_TEST_S3_* and runs this suite after the Go tests)"
)

REPO = Path(__file__).resolve().parents[3]

#: The test server's part size: the smallest allowed, so a three-part upload is small.
PART_SIZE = 5 << 20

#: The test server's largest single upload: a bigger file must go through a session.
MAX_UPLOAD_BYTES = 8 << 20

#: Retries of tests whose waits are not the point (they are recorded, not slept).
FAST = agentfs.RetryPolicy(max_attempts=8, initial_delay=0.01, max_delay=2.0)


@dataclass
class Server:
    """A running `agentfs serve` of this test session."""

    url: str
    bin: str
    env: dict[str, str]
    log: Path
    tokens: dict[str, str] = field(default_factory=dict)

    def token(self, subject: str) -> str:
        """A token of subject (one per subject, made with `agentfs token create`)."""
        if subject not in self.tokens:
            out = subprocess.run([self.bin, "token", "create", "--subject", subject], env=self.env,
                                 capture_output=True, text=True, timeout=60)
            if out.returncode != 0:
                pytest.fail(f"agentfs token create failed: {out.stderr}", pytrace=False)
            self.tokens[subject] = out.stdout.strip().splitlines()[-1].strip()
        return self.tokens[subject]


def _go() -> str:
    go = shutil.which("go") or ("/usr/local/go/bin/go" if os.path.exists("/usr/local/go/bin/go") else None)
    if go is None:
        pytest.fail("go is not on PATH: it builds bin/agentfs for these tests", pytrace=False)
    return go


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _psql(url: str, sql: str) -> None:
    psql = shutil.which("psql")
    if psql is None:
        pytest.fail(f"psql is not on PATH (Debian package postgresql-client); {HOW_TO_START}", pytrace=False)
    out = subprocess.run([psql, "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", url, "-c", sql],
                         capture_output=True, text=True, timeout=60)
    if out.returncode != 0:
        raise RuntimeError(f"psql {sql!r}: {out.stderr.strip()}")


def _with_database(url: str, name: str) -> str:
    p = urlsplit(url)
    return urlunsplit((p.scheme, p.netloc, "/" + name, p.query, p.fragment))


def _tail(path: Path) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-40:])
    except OSError:
        return "(no log)"


def _start_serve(binary: str, env: dict[str, str], log: Path) -> tuple[subprocess.Popen, str]:
    """Start agentfs serve on a free port and wait for /readyz; three tries on fresh ports."""
    for _ in range(3):
        port = _free_port()
        url = f"http://127.0.0.1:{port}"
        env["AGENTFS_LISTEN_ADDR"] = f"127.0.0.1:{port}"
        env["AGENTFS_PUBLIC_URL"] = url
        with open(log, "ab") as out:
            proc = subprocess.Popen([binary, "serve"], env=env, stdout=out, stderr=subprocess.STDOUT,
                                    start_new_session=True)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                break
            try:
                if httpx.get(url + "/readyz", timeout=2).status_code == 200:
                    return proc, url
            except httpx.TransportError:
                pass
            time.sleep(0.1)  # polling a starting process: there is nothing to wait on instead
        if proc.poll() is None:
            _stop(proc)
            pytest.fail(f"agentfs serve was not ready within 60 s:\n{_tail(log)}", pytrace=False)
    pytest.fail(f"agentfs serve exited during startup:\n{_tail(log)}", pytrace=False)


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    db_url = os.environ.get("AGENTFS_TEST_DATABASE_URL")
    s3 = os.environ.get("AGENTFS_TEST_S3_ENDPOINT")
    if not db_url or not s3:
        pytest.fail(f"no test Postgres or S3 server: {HOW_TO_START}", pytrace=False)
    binary = os.environ.get("AGENTFS_TEST_BIN") or str(REPO / "bin" / "agentfs")
    if not os.environ.get("AGENTFS_TEST_BIN"):
        built = subprocess.run([_go(), "build", "-o", binary, "./cmd/agentfs"], cwd=REPO,
                               capture_output=True, text=True, timeout=600)
        if built.returncode != 0:
            pytest.fail(f"go build ./cmd/agentfs failed:\n{built.stderr}", pytrace=False)
    name = "agentfs_py_" + secrets.token_hex(6)
    try:
        _psql(db_url, f"CREATE DATABASE {name}")
    except RuntimeError as e:
        pytest.fail(f"cannot reach the test Postgres ({e}); {HOW_TO_START}", pytrace=False)
    tmp = tmp_path_factory.mktemp("agentfs-serve")
    env = {
        **os.environ,
        "AGENTFS_DATABASE_URL": _with_database(db_url, name),
        "AGENTFS_S3_ENDPOINT": s3,
        "AGENTFS_S3_ACCESS_KEY": os.environ.get("AGENTFS_TEST_S3_ACCESS_KEY", ""),
        "AGENTFS_S3_SECRET_KEY": os.environ.get("AGENTFS_TEST_S3_SECRET_KEY", ""),
        "AGENTFS_S3_USE_SSL": os.environ.get("AGENTFS_TEST_S3_USE_SSL", "false"),
        "AGENTFS_S3_REGION": os.environ.get("AGENTFS_TEST_S3_REGION", "us-east-1"),
        "AGENTFS_S3_BUCKET": name.replace("_", "-"),
        # Content asked for with redirect=True comes from the test S3 server itself.
        "AGENTFS_S3_PUBLIC_ENDPOINT": ("https://" if os.environ.get("AGENTFS_TEST_S3_USE_SSL") == "true" else "http://")
        + s3,
        "AGENTFS_UPLOAD_PART_SIZE": str(PART_SIZE),
        "AGENTFS_MAX_UPLOAD_BYTES": str(MAX_UPLOAD_BYTES),
        "AGENTFS_RATE_LIMIT": "0",
        # Webhook receivers of the tests listen on loopback, and a failed
        # attempt is retried within a fraction of a second.
        "AGENTFS_WEBHOOK_ALLOW_PRIVATE": "true",
        "AGENTFS_WEBHOOK_RETRY_SCHEDULE": "100ms,200ms,400ms",
        "AGENTFS_LOG_LEVEL": "warn",
        "AGENTFS_RECORD_KEY": base64.b64encode(secrets.token_bytes(32)).decode(),
    }
    log = tmp / "agentfs.log"
    proc, url = _start_serve(binary, env, log)
    try:
        yield Server(url=url, bin=binary, env=env, log=log)
    finally:
        _stop(proc)
        try:
            _psql(db_url, f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        except RuntimeError as e:
            print(f"warning: could not drop test database {name}: {e}", file=sys.stderr)


class Sleeper:
    """An injected sleep: records every wait the client asks for and sleeps none of it.

    The first ``free`` waits return at once; later ones block until
    ``release()`` (so a test decides when a poll may come), bounded so that a
    broken client cannot hang the suite.
    """

    def __init__(self, free: Optional[int] = None) -> None:
        self.waits: list[float] = []
        self.free = free
        self._gate = threading.Event()
        self._lock = threading.Lock()

    def __call__(self, seconds: float) -> None:
        with self._lock:
            self.waits.append(seconds)
            n = len(self.waits)
        if self.free is not None and n > self.free:
            if not self._gate.wait(30):
                raise AssertionError("the test never released the client's wait")

    def release(self) -> None:
        self._gate.set()


class AsyncSleeper(Sleeper):
    """Sleeper for AsyncClient."""

    async def __call__(self, seconds: float) -> None:  # type: ignore[override]
        import asyncio

        with self._lock:
            self.waits.append(seconds)
            n = len(self.waits)
        if self.free is not None and n > self.free:
            for _ in range(3000):
                if self._gate.is_set():
                    return
                await asyncio.sleep(0.01)  # waiting on a threading.Event from the event loop
            raise AssertionError("the test never released the client's wait")


@dataclass
class Bundle:
    """The server, a fault proxy in front of it, a token, and a client that bypasses the proxy."""

    server: Server
    proxy: FaultProxy
    token: str
    direct: agentfs.Client
    sleeper: Sleeper

    def client(self, **kw) -> agentfs.Client:
        """A client of the proxy with fast, recorded retries (unless kw says otherwise)."""
        kw.setdefault("retry", FAST)
        kw.setdefault("sleep", self.sleeper)
        return agentfs.Client(self.proxy.url, self.token, **kw)

    def async_client(self, **kw) -> agentfs.AsyncClient:
        kw.setdefault("retry", FAST)
        kw.setdefault("sleep", AsyncSleeper())
        return agentfs.AsyncClient(self.proxy.url, self.token, **kw)

    def files_at(self, path: str) -> list[agentfs.File]:
        """Every file that ever held path, deleted ones included."""
        return self.direct.list_files(path=path, include_deleted=True).data

    def expect_one_file(self, path: str, file_id: str) -> None:
        files = self.files_at(path)
        assert [f.id for f in files] == [file_id], f"files at {path}: {files}"


def _subject(test_name: str) -> str:
    return "py-" + re.sub(r"[^A-Za-z0-9._-]", "-", test_name)[:60]


@pytest.fixture(scope="session")
def tokens(server: Server, request: pytest.FixtureRequest) -> Server:
    """Every test's token, made up front a few at a time (each `agentfs token create` is a process)."""
    names = sorted({_subject(item.name) for item in request.session.items
                    if "bundle" in getattr(item, "fixturenames", ())})
    with ThreadPoolExecutor(max_workers=6) as pool:
        list(pool.map(server.token, names))
    return server


@pytest.fixture
def bundle(tokens: Server, request: pytest.FixtureRequest) -> Iterator[Bundle]:
    """A subject of the test's own (so paths and runs never collide between tests) behind a fresh proxy."""
    server = tokens
    token = server.token(_subject(request.node.name))
    proxy = FaultProxy(server.url)
    direct = agentfs.Client(server.url, token, retry=agentfs.RetryPolicy(max_attempts=1))
    try:
        yield Bundle(server, proxy, token, direct, Sleeper())
    finally:
        direct.close()
        proxy.close()


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def local_file(tmp_path: Path, size: int, seed: int, name: str = "local.bin") -> tuple[Path, bytes, str]:
    """size reproducible pseudo-random bytes in a local file: its path, the bytes and their SHA-256."""
    import random

    data = random.Random(seed).randbytes(size)
    p = tmp_path / name
    p.write_bytes(data)
    return p, data, sha(data)


def expect_problem(exc: BaseException, status: int, code: str) -> agentfs.Problem:
    assert isinstance(exc, agentfs.Problem), f"{exc!r} is not a Problem {status} {code}"
    assert exc.status == status and exc.code == code and exc.request_id, f"{exc!r}: want {status} {code}"
    return exc


def wait_until(what: str, cond: Callable[[], bool], timeout: float = 20) -> None:
    """Poll cond until it holds, failing after a generous bound so that a broken client cannot hang a test."""
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"never saw {what}")
        time.sleep(0.01)  # polling another thread's progress
