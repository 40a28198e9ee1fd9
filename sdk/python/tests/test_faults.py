"""The retry policy against the real server, with a fault-injecting proxy in front (twins of client/client_test.go)."""

from __future__ import annotations

import re
import threading
from datetime import datetime, timedelta, timezone
from email.utils import format_datetime
from typing import Any, Callable, Optional

import httpx
import pytest

import agentfs
from conftest import Bundle, Sleeper, expect_problem, sha, wait_until
from faultproxy import (
    answer_problem,
    corrupt_response,
    drop_after_commit,
    drop_before_forward,
    reset_before_response,
)

KEY = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$")


def test_retries_unavailable_honouring_retry_after(bundle: Bundle) -> None:
    """Two 503s with Retry-After: 1, then the server: three attempts with one key, waits of at least 1 s, one file."""
    c = bundle.client()
    bundle.proxy.inject("POST", "/v1/files", 2, answer_problem(503, "STORAGE_UNAVAILABLE", "1"))
    f = c.put_file("reports/a.txt", b"hello", content_type="text/plain")
    posts = bundle.proxy.requests("POST", "/v1/files")
    assert [p.status for p in posts] == [503, 503, 201]
    assert all(p.key == posts[0].key and KEY.match(p.key) and p.body_bytes == 5 for p in posts)
    assert len(bundle.sleeper.waits) == 2 and all(w >= 1 for w in bundle.sleeper.waits)
    bundle.expect_one_file("reports/a.txt", f.id)


def test_replays_write_whose_response_was_lost(bundle: Bundle) -> None:
    """The server commits, the response never arrives; the retry with the same key gets the same file."""
    c = bundle.client()
    bundle.proxy.inject("POST", "/v1/files", 1, drop_after_commit)
    f = c.put_file("out/result.json", b'{"ok":true}', content_type="application/json")
    posts = bundle.proxy.requests("POST", "/v1/files")
    assert len(posts) == 2
    assert (posts[0].server_status, posts[0].status) == (201, 0)
    assert posts[1].replayed and posts[1].key == posts[0].key and posts[1].status == 201
    assert f.sha256 == sha(b'{"ok":true}')
    bundle.expect_one_file("out/result.json", f.id)


def test_never_retries_client_errors(bundle: Bundle) -> None:
    c = bundle.client()
    taken = bundle.direct.put_file("taken.txt", b"mine")
    bundle.direct.put_file("keyed.txt", b"one", idempotency_key="used-once")
    cases: list[tuple[str, dict[str, Any], int, str]] = [
        ("taken.txt", {}, 409, "PATH_EXISTS"),
        ("keyed.txt", {"idempotency_key": "used-once"}, 409, "IDEMPOTENCY_CONFLICT"),
        ("taken.txt", {"if_none_match": "*"}, 412, "PRECONDITION_FAILED"),
        ("taken.txt", {"if_exists": "replace", "if_match": f'"{sha(b"other")}"'}, 412, "PRECONDITION_FAILED"),
        ("/absolute", {}, 422, "INVALID_PATH"),
        ("taken.txt", {"if_match": taken.etag}, 422, "VALIDATION_FAILED"),
        ("new.txt", {"sha256": "0" * 64}, 422, "CHECKSUM_MISMATCH"),
    ]
    for path, kw, status, code in cases:
        before = len(bundle.proxy.requests("POST", "/v1/files"))
        with pytest.raises(agentfs.Problem) as ei:
            c.put_file(path, b"two", **kw)
        p = expect_problem(ei.value, status, code)
        assert not p.retryable
        assert len(bundle.proxy.requests("POST", "/v1/files")) - before == 1, f"{code}: retried"
    assert bundle.sleeper.waits == []
    bundle.expect_one_file("taken.txt", taken.id)
    assert bundle.files_at("new.txt") == []


def test_stops_when_retry_after_exceeds_cap(bundle: Bundle) -> None:
    """A hint above max_delay is neither shortened nor waited for: the problem comes back after one attempt."""
    c = bundle.client()  # max_delay 2 s
    bundle.proxy.inject("POST", "/v1/files", 5, answer_problem(503, "STORAGE_UNAVAILABLE", "5"))
    with pytest.raises(agentfs.ServerError) as ei:
        c.put_file("capped.txt", b"x")
    p = expect_problem(ei.value, 503, "STORAGE_UNAVAILABLE")
    assert p.retry_after == 5 and p.retryable
    assert len(bundle.proxy.requests("POST", "/v1/files")) == 1

    date = format_datetime(datetime.now(timezone.utc) + timedelta(minutes=2), usegmt=True)
    bundle.proxy.inject("GET", "/v1/files", 5, answer_problem(429, "RATE_LIMITED", date))
    with pytest.raises(agentfs.RateLimitError) as ei:
        c.list_files()
    assert ei.value.retry_after is not None and ei.value.retry_after > 60
    assert len(bundle.proxy.requests("GET", "/v1/files")) == 1
    assert bundle.sleeper.waits == []
    assert bundle.files_at("capped.txt") == []


def test_gives_up_after_max_attempts(bundle: Bundle) -> None:
    """The attempt budget bounds the retries of a read, and a read that fails before any response is retried."""
    f = bundle.direct.put_file("r.txt", b"r")
    path = "/v1/files/" + f.id
    c = bundle.client(retry=agentfs.RetryPolicy(max_attempts=3, initial_delay=0.001, max_delay=0.01))
    bundle.proxy.inject("GET", path, 10, answer_problem(500, "INTERNAL"))
    with pytest.raises(agentfs.ServerError) as ei:
        c.get_file(f.id)
    expect_problem(ei.value, 500, "INTERNAL")
    assert len(bundle.proxy.requests("GET", path)) == 3

    bundle.proxy.clear_faults()
    bundle.proxy.inject("GET", path, 1, drop_before_forward)
    bundle.proxy.inject("GET", path, 1, answer_problem(502, "INTERNAL"))
    assert bundle.client().get_file(f.id).id == f.id
    assert len(bundle.proxy.requests("GET", path)) == 6


def test_reset_before_response_retried_only_when_safe(bundle: Bundle) -> None:
    """A connection reset before any response (the server never saw the request) is sent again only when safe."""
    plain = bundle.client(idempotency_keys=False)
    bundle.proxy.inject("POST", "/v1/files", 1, reset_before_response)
    with pytest.raises(agentfs.APIConnectionError) as ei:
        plain.put_file("reset/plain.txt", b"once")
    assert not isinstance(ei.value, agentfs.Problem) and isinstance(ei.value.__cause__, httpx.TransportError)
    assert [p.key for p in bundle.proxy.requests("POST", "/v1/files")] == [""]
    assert bundle.files_at("reset/plain.txt") == []

    # Safe: a keyed create, an unkeyed replace, delete and restore, a read.
    keyed = bundle.client()
    bundle.proxy.inject("POST", "/v1/files", 1, reset_before_response)
    f = keyed.put_file("reset/keyed.txt", b"once")
    posts = bundle.proxy.requests("POST", "/v1/files")[1:]
    assert len(posts) == 2 and posts[0].key == posts[1].key != "" and posts[1].status == 201
    bundle.proxy.inject("POST", "/v1/files", 1, reset_before_response)
    r = plain.put_file("reset/keyed.txt", b"twice", if_exists="replace")
    assert r.id == f.id and r.version == 2
    for method, path, call in [
        ("DELETE", f"/v1/files/{f.id}", lambda: plain.delete_file(f.id)),
        ("POST", f"/v1/files/{f.id}/restore", lambda: plain.restore_file(f.id)),
        ("GET", f"/v1/files/{f.id}", lambda: plain.get_file(f.id)),
    ]:
        bundle.proxy.inject(method, path, 1, reset_before_response)
        assert call().id == f.id
        assert [s.status for s in bundle.proxy.requests(method, path)] == [0, 200]
    bundle.expect_one_file("reset/keyed.txt", f.id)


def test_unkeyed_writes_after_drop(bundle: Bundle) -> None:
    """Without keys a dropped plain create is not repeated (it may have happened); replace, delete, restore are."""
    c = bundle.client(idempotency_keys=False)
    bundle.proxy.inject("POST", "/v1/files", 1, drop_after_commit)
    with pytest.raises(agentfs.APIConnectionError):
        c.put_file("plain.txt", b"once")
    posts = bundle.proxy.requests("POST", "/v1/files")
    assert [(p.key, p.server_status) for p in posts] == [("", 201)]
    created = bundle.files_at("plain.txt")
    assert len(created) == 1

    bundle.proxy.inject("POST", "/v1/files", 1, drop_after_commit)
    f = c.put_file("plain.txt", b"once", if_exists="replace")
    assert f.id == created[0].id and f.version == 1
    assert len(bundle.proxy.requests("POST", "/v1/files")) == 3

    path = "/v1/files/" + f.id
    bundle.proxy.inject("DELETE", path, 1, drop_after_commit)
    assert c.delete_file(f.id).deleted_at is not None
    bundle.proxy.inject("POST", path + "/restore", 1, drop_after_commit)
    assert c.restore_file(f.id).deleted_at is None
    assert len(bundle.proxy.requests("DELETE", path)) == 2
    assert len(bundle.proxy.requests("POST", path + "/restore")) == 2
    bundle.expect_one_file("plain.txt", f.id)


def test_non_seekable_body_is_not_resent(bundle: Bundle) -> None:
    """A stream that was read is sent once, whatever comes back; a factory makes it re-sendable."""
    c = bundle.client()
    bundle.proxy.inject("POST", "/v1/files", 1, answer_problem(503, "STORAGE_UNAVAILABLE", "1"))
    with pytest.raises(agentfs.ServerError):
        c.put_file("s.txt", iter([b"str", b"eam"]))
    posts = bundle.proxy.requests("POST", "/v1/files")
    assert [(p.status, p.body_bytes) for p in posts] == [(503, 6)]

    bundle.proxy.inject("POST", "/v1/files", 1, drop_before_forward)
    with pytest.raises(agentfs.BodyNotRewindableError, match="cannot be re-read"):
        c.put_file("s.txt", iter([b"stream"]))
    assert len(bundle.proxy.requests("POST", "/v1/files")) == 2
    assert bundle.files_at("s.txt") == []

    bundle.proxy.inject("POST", "/v1/files", 1, answer_problem(503, "STORAGE_UNAVAILABLE", "1"))
    f = c.put_file("s.txt", lambda: iter([b"stream"]))
    assert f.sha256 == sha(b"stream")
    posts = bundle.proxy.requests("POST", "/v1/files")
    assert len(posts) == 4 and posts[3].key == posts[2].key and posts[3].body_bytes == 6


def test_download_verifies_the_declared_digest(bundle: Bundle, tmp_path: Any) -> None:
    """Bytes changed on the way no longer match Repr-Digest: download_file says so and leaves no file."""
    c = bundle.client()
    f = bundle.direct.put_file("d/data.bin", b"the real content")
    bundle.proxy.inject("GET", f"/v1/files/{f.id}/content", 1, corrupt_response)
    dest = tmp_path / "data.bin"
    with pytest.raises(agentfs.AgentFSError, match="SHA-256"):
        c.download_file(f.id, dest)
    assert not dest.exists() and list(tmp_path.iterdir()) == []
    assert c.download_file(f.id, dest) == 16 and dest.read_bytes() == b"the real content"


class SlowUpload:
    """A keyed upload straight to the server whose body stalls after its first part, so its key stays in progress."""

    def __init__(self, b: Bundle, path: str, key: str, first: bytes, headers: Optional[dict[str, str]] = None):
        self._go = threading.Event()
        self._rest = b""
        self.status = -1

        def body() -> Any:
            yield first
            self._go.wait(30)
            yield self._rest

        def run() -> None:
            try:
                res = httpx.post(b.server.url + "/v1/files", params={"path": path}, content=body(), timeout=60,
                                 headers={"Authorization": "Bearer " + b.token, "Idempotency-Key": key,
                                          **(headers or {})})
                self.status = res.status_code
            except httpx.HTTPError:
                self.status = 0

        self._thread = threading.Thread(target=run, daemon=True)
        self._thread.start()

        def claimed() -> bool:
            try:
                return b.direct.get_operation(key).status == "in_progress"
            except agentfs.NotFoundError:
                return False

        wait_until("the slow upload claim its key", claimed)

    def finish(self, rest: bytes) -> int:
        self._rest = rest
        self._go.set()
        self._thread.join(60)
        return self.status


def in_background(fn: Callable[[], Any]) -> Callable[[], Any]:
    """Run fn in a thread; the returned function joins it and returns (or raises) its outcome."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = fn()
        except BaseException as e:  # handed to the test thread
            box["error"] = e

    t = threading.Thread(target=run, daemon=True)
    t.start()

    def join() -> Any:
        t.join(60)
        assert not t.is_alive(), "the call never returned"
        if "error" in box:
            raise box["error"]
        return box["value"]

    return join


def answered_in_progress(b: Bundle) -> bool:
    return any(s.method == "POST" and s.status == 409 for s in b.proxy.seen())


def polled_in_progress(b: Bundle, key: str) -> bool:
    return any(s.status == 200 and b'"in_progress"' in s.server_body
               for s in b.proxy.requests("GET", "/v1/operations/" + key))


def put_while_held(bundle: Bundle, c: agentfs.Client, sleeper: Sleeper, slow: SlowUpload, path: str,
                   content: bytes, key: str, rest: bytes, status: int) -> Any:
    """Puts content at path with key while slow holds the key: once the put was told
    OPERATION_IN_PROGRESS and a poll saw the operation in progress, slow sends rest (answered
    status) and the sleeper lets the put go on; returns what the put returned."""
    join = in_background(lambda: c.put_file(path, content, idempotency_key=key))
    wait_until("OPERATION_IN_PROGRESS and a poll while in progress",
               lambda: answered_in_progress(bundle) and polled_in_progress(bundle, key))
    assert slow.finish(rest) == status
    sleeper.release()
    return join()


def test_polls_operation_in_progress(bundle: Bundle) -> None:
    """A write whose key another request holds waits as Retry-After says, polls /v1/operations/{key}
    while it is in progress, and returns the recorded file without sending the write again."""
    sleeper = Sleeper(free=1)  # the wait before the first poll is free; later ones wait for the test
    c = bundle.client(sleep=sleeper, retry=agentfs.RetryPolicy(initial_delay=0.01, max_delay=10))
    slow = SlowUpload(bundle, "slow.txt", "slow-1", b"first half ")
    f = put_while_held(bundle, c, sleeper, slow, "slow.txt", b"first half second half", "slow-1", b"second half", 201)

    files = bundle.files_at("slow.txt")
    assert [g.id for g in files] == [f.id] and f.sha256 == sha(b"first half second half")
    posts = bundle.proxy.requests("POST", "/v1/files")
    polls = bundle.proxy.requests("GET", "/v1/operations/slow-1")
    assert len(posts) == 1 and len(polls) >= 2, (posts, polls)
    hint = int(posts[0].retry_after)
    assert hint >= 1 and sleeper.waits[0] >= hint, f"waited {sleeper.waits[0]} despite Retry-After {hint}"
    assert polls[-1].server_status == 200 and b'"completed"' in polls[-1].server_body


def test_resends_when_key_holds_nothing(bundle: Bundle) -> None:
    """The request that held the key fails and releases it; the poll's 404 proves nothing happened,
    and only then (not while in progress) is the write sent again, with the same key."""
    sleeper = Sleeper(free=1)
    c = bundle.client(sleep=sleeper, retry=agentfs.RetryPolicy(initial_delay=0.01, max_delay=10))
    wrong = agentfs.digest_of(sha(b"not what is sent"))
    slow = SlowUpload(bundle, "doomed.txt", "doomed-1", b"abc ", {"Content-Digest": wrong})
    f = put_while_held(bundle, c, sleeper, slow, "doomed.txt", b"abc def", "doomed-1", b"def", 422)

    posts = bundle.proxy.requests("POST", "/v1/files")
    assert len(posts) == 2 and posts[1].key == "doomed-1" and posts[1].server_status == 201, posts
    polls = bundle.proxy.requests("GET", "/v1/operations/doomed-1")
    assert polls and polls[-1].server_status == 404 and polls[-1].at < posts[1].at
    assert f.sha256 == sha(b"abc def")
    bundle.expect_one_file("doomed.txt", f.id)


def test_create_link_learns_its_url_after_a_poll(bundle: Bundle) -> None:
    """The server made the link but the client was told OPERATION_IN_PROGRESS: the poll shows the
    url null (redacted), so the client sends the request again with the key, and the replay to its
    own token answers the url (twin of TestCreateLinkLearnsItsURLAfterAPoll). One link is made."""
    c = bundle.client()
    f = bundle.direct.put_file("notes/polled.txt", b"polled")
    path = f"/v1/files/{f.id}/links"

    def made_then_busy(p: Any, h: Any, rec: Any) -> None:
        p.forward(h, rec)
        answer_problem(409, "OPERATION_IN_PROGRESS", "1")(p, h, rec)

    bundle.proxy.inject("POST", path, 1, made_then_busy)
    link = c.create_link(f.id)
    assert link.url and "/s/" in link.url, link
    posts = bundle.proxy.requests("POST", path)
    assert len(posts) == 2 and posts[1].key == posts[0].key and posts[1].replayed and posts[0].status == 409, posts
    polls = bundle.proxy.requests("GET", "/v1/operations/" + posts[0].key)
    assert len(polls) == 1 and polls[0].server_status == 200 and b'"redacted":["url"]' in polls[0].server_body
    assert [l.id for l in bundle.direct.links(f.id)] == [link.id]
    assert httpx.get(link.url).status_code == 200
