"""The client retry policy as unit tests: the decisions, driven step by step, with no network or clock."""

from __future__ import annotations

import json
import random
import re
from email.utils import format_datetime
from datetime import datetime, timedelta, timezone
from typing import Any, Optional

import pytest

import agentfs
from agentfs import _retry as r
from agentfs._base import digest_of, sha256_of_digest
from agentfs._errors import problem_from_dict, problem_from_response
from agentfs._events import FollowState
from agentfs._models import EventPage, Link, Run, RunCounts, seconds_of
from agentfs._request import StreamBody, make_body, route_request

MAX = 30.0

# Every route the client sends, and whether it may be repeated without a key
# after its connection failed before any response.
ROUTES = [
    (r.Call(r.ROUTE_PROTOCOL), True),
    (r.Call(r.ROUTE_PUT_FILE), False),
    (r.Call(r.ROUTE_PUT_FILE, replace=True), True),
    (r.Call(r.ROUTE_LIST_FILES), True),
    (r.Call(r.ROUTE_FILE), True),
    (r.Call(r.ROUTE_FILE_CONTENT), True),
    (r.Call(r.ROUTE_DELETE_FILE), True),
    (r.Call(r.ROUTE_RESTORE_FILE), True),
    (r.Call(r.ROUTE_OPERATION), True),
    (r.Call(r.ROUTE_CREATE_UPLOAD), True),
    (r.Call(r.ROUTE_UPLOAD_PART), True),
    (r.Call(r.ROUTE_COMPLETE), True),
    (r.Call(r.ROUTE_ABORT_UPLOAD), True),
    (r.Call(r.ROUTE_UPLOAD), True),
    (r.Call(r.ROUTE_BATCH), True),
    # POST /v1/batch always carries a key; without one the server refuses it.
    (r.Call(r.ROUTE_CREATE_BATCH), False),
    (r.Call(r.ROUTE_LIST_UPLOADS), True),
    (r.Call(r.ROUTE_LIST_BATCHES), True),
    # Cancelling a batch or revoking a link again changes nothing; a PATCH sets an absolute expires_at.
    (r.Call(r.ROUTE_CANCEL_BATCH), True),
    (r.Call(r.ROUTE_REVOKE_LINK), True),
    (r.Call(r.ROUTE_PATCH_FILE), True),
    (r.Call(r.ROUTE_LIST_VERSIONS), True),
    (r.Call(r.ROUTE_VERSION), True),
    (r.Call(r.ROUTE_VERSION_CONTENT), True),
    # A revert, a move or a link repeated without a key could act twice; with one (the client makes one) it replays.
    (r.Call(r.ROUTE_REVERT), False),
    (r.Call(r.ROUTE_MOVE), False),
    (r.Call(r.ROUTE_CREATE_LINK), False),
    (r.Call(r.ROUTE_LINKS), True),
    (r.Call(r.ROUTE_EVENTS), True),
    (r.Call(r.ROUTE_RUN), True),
    (r.Call(r.ROUTE_RUN_ARCHIVE), True),
    (r.Call(r.ROUTE_RUN_RECOVERY), True),
    # A run revert always carries a key, like a batch; without one the server refuses it.
    (r.Call(r.ROUTE_REVERT_RUN), False),
]

S, R, P = r.Verdict.STOP, r.Verdict.RETRY, r.Verdict.POLL
BY_SAFETY = None  # without a key: as the route's safety says
RESULTS = [
    ("ConnectionFailed", r.Result(), R, BY_SAFETY),
    ("ConnectionFailedBodyLost", r.Result(body_lost=True), S, S),
    ("408", r.Result(408, "REQUEST_TIMEOUT"), R, R),
    ("429", r.Result(429, "RATE_LIMITED", 1), R, R),
    ("429Quota", r.Result(429, "QUOTA_EXCEEDED", 20), R, R),
    ("500", r.Result(500, "INTERNAL"), R, R),
    ("502NotAProblem", r.Result(502), R, R),
    ("503", r.Result(503, "STORAGE_UNAVAILABLE", 1), R, R),
    ("504", r.Result(504), R, R),
    ("503RetryAfterAtCap", r.Result(503, retry_after=MAX), R, R),
    ("503RetryAfterAboveCap", r.Result(503, retry_after=MAX + 1), S, S),
    ("429RetryAfterAboveCap", r.Result(429, retry_after=3600), S, S),
    ("503BodyLost", r.Result(503, body_lost=True), S, S),
    ("InProgress", r.Result(409, "OPERATION_IN_PROGRESS", 1), P, BY_SAFETY),
    ("InProgressNoRetryAfter", r.Result(409, "OPERATION_IN_PROGRESS"), P, BY_SAFETY),
    ("InProgressBodyLost", r.Result(409, "OPERATION_IN_PROGRESS", body_lost=True), P, S),
    ("InProgressRetryAfterAboveCap", r.Result(409, "OPERATION_IN_PROGRESS", 60), S, S),
    *[(f"{st}{code}", r.Result(st, code), S, S) for st, code in [
        (400, "INVALID_REQUEST"), (400, "IDEMPOTENCY_KEY_REQUIRED"), (401, "UNAUTHENTICATED"),
        (403, "FORBIDDEN"), (404, "NOT_FOUND"), (405, "METHOD_NOT_ALLOWED"), (409, "PATH_EXISTS"),
        (409, "IDEMPOTENCY_CONFLICT"), (409, "UPLOAD_COMPLETED"), (409, "UPLOAD_ABORTED"),
        (409, "UPLOAD_EXPIRED"), (411, "LENGTH_REQUIRED"), (412, "PRECONDITION_FAILED"),
        (413, "PAYLOAD_TOO_LARGE"), (415, "UNSUPPORTED_MEDIA_TYPE"), (416, "RANGE_NOT_SATISFIABLE"),
        (422, "SIZE_MISMATCH"), (422, "PARTS_MISSING"), (422, "CHECKSUM_MISMATCH"),
        (422, "VALIDATION_FAILED"), (451, "CONTENT_BLOCKED"), (409, "CHANGED_SINCE_RUN"),
        (410, "CURSOR_EXPIRED")]],
    ("409WithRetryAfter", r.Result(409, "PATH_EXISTS", 1), S, S),
]


@pytest.mark.parametrize("call,safe", ROUTES, ids=[f"{c.route}/replace={c.replace}" for c, _ in ROUTES])
def test_classify(call: r.Call, safe: bool) -> None:
    for name, res, keyed_want, plain_want in RESULTS:
        keyed = r.Call(call.route, keyed=True, replace=call.replace)
        assert r.classify(keyed, res, MAX) is keyed_want, f"{name} keyed"
        want = plain_want if plain_want is not None else (R if safe else S)
        assert r.classify(call, res, MAX) is want, f"{name} without key"


def test_delays_full_jitter() -> None:
    """Each wait lies in [0, the doubling delay capped at max_delay], and they spread over that range."""
    policy = agentfs.RetryPolicy()
    bounds = [1, 2, 4, 8, 16, 30, 30, 30]
    low, high = [False] * len(bounds), [False] * len(bounds)
    for seed in range(500):
        d = r.Delays(policy, random.Random(seed))
        for i, b in enumerate(bounds):
            w = d.next()
            assert 0 <= w <= b, f"seed {seed} wait {i} = {w}"
            low[i] = low[i] or w < b / 4
            high[i] = high[i] or w > b * 3 / 4
    assert all(low) and all(high)


def test_delays_seeded_source_repeats() -> None:
    def waits(seed: int) -> list[float]:
        d = r.Delays(agentfs.RetryPolicy(), random.Random(seed))
        return [d.next() for _ in range(6)]

    assert waits(42) == waits(42)
    assert waits(42) != waits(43)


def test_delays_retry_after_is_a_floor() -> None:
    """A hint is never shortened by the jitter, applies to the next wait only, and the doubling goes on beneath it."""
    policy = agentfs.RetryPolicy(initial_delay=0.01, max_delay=20)
    for seed in range(200):
        d = r.Delays(policy, random.Random(seed))
        d.at_least(5)
        assert d.next() >= 5
        assert d.next() <= 0.02


def test_retry_policy_defaults_and_bounds() -> None:
    p = agentfs.RetryPolicy()
    assert (p.max_attempts, p.initial_delay, p.max_delay) == (8, 1.0, 30.0)
    assert agentfs.RetryPolicy(max_delay=60).max_delay == 60
    for bad in [dict(max_delay=61), dict(max_attempts=0), dict(initial_delay=-1),
                dict(initial_delay=2, max_delay=1)]:
        with pytest.raises(ValueError):
            agentfs.RetryPolicy(**bad)


@pytest.mark.parametrize("value,want", [
    (None, None), ("", None), ("1", 1.0), (" 30 ", 30.0), ("0", None), ("-5", None), ("soon", None),
    ("1.5", None), ("99999999999999999", r.MAX_RETRY_AFTER),
])
def test_parse_retry_after(value: Optional[str], want: Optional[float]) -> None:
    assert r.parse_retry_after(value, now=0) == want


def test_parse_retry_after_http_date() -> None:
    now = datetime(2025, 1, 2, 3, 4, 5, tzinfo=timezone.utc)
    later = format_datetime(now + timedelta(seconds=90), usegmt=True)
    earlier = format_datetime(now - timedelta(minutes=1), usegmt=True)
    assert r.parse_retry_after(later, now=now.timestamp()) == 90
    assert r.parse_retry_after(earlier, now=now.timestamp()) is None


def test_problem_of_non_problem_body() -> None:
    p = problem_from_response(502, {"x-request-id": "req_x"}, b"<html>bad gateway</html>", retry_after=3)
    assert isinstance(p, agentfs.ServerError)
    assert (p.status, p.code, p.retryable, p.retry_after, p.request_id) == (502, None, True, 3, "req_x")
    assert "bad gateway" in (p.detail or "") and "502" in str(p)


def test_problem_types() -> None:
    def of(status: int, code: str, **extra: Any) -> agentfs.Problem:
        return problem_from_dict(status, {"status": status, "code": code, "title": "t", **extra})

    assert type(of(409, "PATH_EXISTS", existing_file_id="file_1")) is agentfs.PathExistsError
    assert of(409, "PATH_EXISTS", existing_file_id="file_1").existing_file_id == "file_1"
    assert type(of(409, "UPLOAD_COMPLETED")) is agentfs.ConflictError
    assert type(of(409, "OPERATION_IN_PROGRESS")) is agentfs.OperationInProgressError
    missing = of(422, "PARTS_MISSING", missing_parts=[2, 3])
    assert type(missing) is agentfs.UnprocessableEntityError and missing.missing_parts == [2, 3]
    invalid = of(422, "VALIDATION_FAILED", errors=[{"field": "limit", "message": "too big"}])
    assert invalid.errors == [agentfs.FieldError("limit", "too big")]
    assert type(of(404, "NOT_FOUND")) is agentfs.NotFoundError
    forbidden = of(403, "FORBIDDEN", missing_scope="read")
    assert forbidden.missing_scope == "read" and "missing_scope read" in str(forbidden)
    assert of(404, "NOT_FOUND").missing_scope is None
    assert type(of(503, "STORAGE_UNAVAILABLE")) is agentfs.ServerError
    assert type(of(418, "TEAPOT")) is agentfs.Problem
    changed = of(409, "CHANGED_SINCE_RUN")
    assert type(changed) is agentfs.ChangedSinceRunError and isinstance(changed, agentfs.ConflictError)
    assert type(of(410, "CURSOR_EXPIRED")) is agentfs.CursorExpiredError
    assert type(problem_from_response(410, {}, b"gone", retry_after=None)) is agentfs.CursorExpiredError
    import pickle

    again = pickle.loads(pickle.dumps(of(409, "PATH_EXISTS", existing_file_id="file_1")))
    assert type(again) is agentfs.PathExistsError and again.existing_file_id == "file_1"


def test_digests() -> None:
    empty = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    assert digest_of(empty) == "sha-256=:47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=:"
    assert sha256_of_digest("md5=:abc=:, sha-256=:47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=:") == empty
    assert sha256_of_digest("sha-256=:short=:") is None
    assert sha256_of_digest(None) is None
    with pytest.raises(ValueError):
        digest_of("xyz")


def test_new_idempotency_key() -> None:
    keys = {agentfs.new_idempotency_key() for _ in range(100)}
    assert len(keys) == 100
    assert all(re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,127}", k) for k in keys)


def test_client_rejects_bad_configuration(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AGENTFS_URL", raising=False)
    for kw in [dict(base_url="127.0.0.1:8080"), dict(base_url="ftp://h"), dict(base_url="http://h/?a=1"),
               dict(base_url="http://h", agent_id="has space"), dict(base_url="http://h", run_id=""), dict()]:
        with pytest.raises(ValueError):
            agentfs.Client(token="t", **kw)
    with pytest.raises(TypeError):
        agentfs.Client("http://h", "t", retry={"max_attempts": 1})  # type: ignore[arg-type]
    monkeypatch.setenv("AGENTFS_URL", "https://h:1/prefix/")
    monkeypatch.setenv("AGENTFS_TOKEN", "tok")
    c = agentfs.Client(agent_id="a-1", run_id="run:2")
    assert c.base_url == "https://h:1/prefix" and c._token == "tok"
    c.close()


# Driving retry_steps by hand: what a client would do, step by step.


class Drive:
    """Runs retry_steps for one request, answering each Send and Poll from a script."""

    def __init__(self, req: Any, policy: agentfs.RetryPolicy = agentfs.RetryPolicy(), seed: int = 1) -> None:
        self.gen = r.retry_steps(req, policy, random.Random(seed))
        self.log: list[Any] = []
        self.result: Any = None

    def run(self, *answers: Any) -> list[Any]:
        """Answer Sends and Polls in order; returns the steps seen. Raises what the call raised."""
        answers_left = list(answers)
        step = next(self.gen)
        while True:
            self.log.append(step)
            if isinstance(step, r.Sleep):
                out = None
            else:
                assert answers_left, f"no answer scripted for {step}"
                out = answers_left.pop(0)
                if callable(out):  # an answer that acts while the request is "sent"
                    out = out()
            try:
                step = self.gen.send(out)
            except StopIteration as done:
                self.result = done.value
                assert not answers_left, f"answers left over: {answers_left}"
                return self.log

    def kinds(self) -> list[str]:
        return [type(s).__name__ for s in self.log]


def problem(status: int, code: str, retry_after: Optional[float] = None) -> agentfs.Problem:
    return problem_from_dict(status, {"status": status, "code": code, "title": "t", "request_id": "req_1"},
                             retry_after=retry_after)


def ok(body: Any = None, status: int = 201) -> r.Reply:
    return r.Reply(status, {}, body=json.dumps(body or {"id": "file_1"}).encode())


def put(key: Optional[str] = "k-1", replace: bool = False, body: Any = b"x") -> Any:
    req = route_request(r.ROUTE_PUT_FILE, "/v1/files", key=key, replace=replace)
    req.body = make_body(body)
    return req


def operation(status: str, response_status: Optional[int] = None, response: Any = None,
              route: str = "/v1/files", method: str = "POST") -> r.Reply:
    return ok({"object": "operation", "idempotency_key": "k-1", "status": status, "method": method,
               "route": route, "response_status": response_status, "response": response}, status=200)


def test_steps_retry_after_is_a_floor() -> None:
    d = Drive(put())
    d.run(problem(503, "STORAGE_UNAVAILABLE", 5), problem(503, "STORAGE_UNAVAILABLE", 7), ok())
    assert d.kinds() == ["Send", "Sleep", "Send", "Sleep", "Send"]
    assert d.log[1].seconds >= 5 and d.log[3].seconds >= 7
    assert d.result.json() == {"id": "file_1"}


def test_steps_hint_above_cap_stops() -> None:
    d = Drive(put(), agentfs.RetryPolicy(max_delay=10))
    with pytest.raises(agentfs.ServerError) as ei:
        d.run(problem(503, "STORAGE_UNAVAILABLE", 11))
    assert ei.value.retry_after == 11 and d.kinds() == ["Send"]


@pytest.mark.parametrize("status,code", [(400, "INVALID_REQUEST"), (404, "NOT_FOUND"), (409, "PATH_EXISTS"),
                                         (412, "PRECONDITION_FAILED"), (422, "VALIDATION_FAILED")])
def test_steps_never_retry_client_errors(status: int, code: str) -> None:
    d = Drive(put())
    with pytest.raises(agentfs.Problem) as ei:
        d.run(problem(status, code))
    assert (ei.value.status, ei.value.code) == (status, code) and d.kinds() == ["Send"]


def test_steps_give_up_after_max_attempts() -> None:
    d = Drive(put(), agentfs.RetryPolicy(max_attempts=3))
    with pytest.raises(agentfs.ServerError):
        d.run(*[problem(500, "INTERNAL")] * 3)
    assert d.kinds() == ["Send", "Sleep", "Send", "Sleep", "Send"]
    # The waits double under full jitter: [0, 1], then [0, 2].
    assert 0 <= d.log[1].seconds <= 1 and 0 <= d.log[3].seconds <= 2


def test_steps_connection_failure_only_when_safe() -> None:
    unsafe = Drive(put(key=None))
    with pytest.raises(agentfs.APIConnectionError):
        unsafe.run(r.NoResponse(OSError("connection reset")))
    assert unsafe.kinds() == ["Send"]
    for req in (put(), put(key=None, replace=True)):
        safe = Drive(req)
        safe.run(r.NoResponse(OSError("connection reset")), ok())
        assert safe.kinds() == ["Send", "Sleep", "Send"]


def test_steps_lost_stream_is_not_sent_again() -> None:
    def sent(req: Any, answer: Any) -> Any:
        def send() -> Any:
            req.body.used = True  # the attempt read from the stream
            return answer
        return send

    req = put(body=iter([b"stream"]))
    assert isinstance(req.body, StreamBody) and not req.body.lost()
    d = Drive(req)
    with pytest.raises(agentfs.ServerError):
        d.run(sent(req, problem(503, "STORAGE_UNAVAILABLE", 1)))
    assert d.kinds() == ["Send"]
    req = put(body=iter([b"stream"]))
    d = Drive(req)
    with pytest.raises(agentfs.BodyNotRewindableError, match="cannot be re-read"):
        d.run(sent(req, r.NoResponse(OSError("reset"))))
    assert d.kinds() == ["Send"]
    # A keyed stream that was read may still learn its outcome: a poll sends no body.
    req = put(body=iter([b"stream"]))
    d = Drive(req)
    d.run(sent(req, problem(409, "OPERATION_IN_PROGRESS", 1)), operation("completed", 201, {"id": "f"}))
    assert d.kinds() == ["Send", "Sleep", "Poll"]


def test_steps_in_progress_polls_the_operation() -> None:
    """OPERATION_IN_PROGRESS: wait as Retry-After says, poll /v1/operations/{key}; the recorded answer is the answer."""
    d = Drive(put())
    recorded = {"object": "file", "id": "file_rec"}
    d.run(problem(409, "OPERATION_IN_PROGRESS", 2), operation("in_progress"),
          operation("completed", 201, recorded))
    assert d.kinds() == ["Send", "Sleep", "Poll", "Sleep", "Poll"]
    assert d.log[2] == r.Poll("k-1")
    assert d.log[1].seconds >= 2 and d.log[3].seconds >= 2  # the in-progress hint holds for every poll
    assert d.result.status == 201 and d.result.json() == recorded
    assert d.result.headers["idempotent-replayed"] == "true"


def test_steps_in_progress_resends_only_after_404() -> None:
    d = Drive(put())
    d.run(problem(409, "OPERATION_IN_PROGRESS", 1), operation("in_progress"), problem(404, "NOT_FOUND"), ok())
    assert d.kinds() == ["Send", "Sleep", "Poll", "Sleep", "Poll", "Send"]


def test_steps_in_progress_recorded_problem_is_raised() -> None:
    d = Drive(put())
    with pytest.raises(agentfs.PathExistsError) as ei:
        d.run(problem(409, "OPERATION_IN_PROGRESS", 1),
              operation("completed", 409, {"status": 409, "code": "PATH_EXISTS", "existing_file_id": "file_9"}))
    assert ei.value.existing_file_id == "file_9"


def test_steps_in_progress_other_operation_under_key() -> None:
    d = Drive(put())
    with pytest.raises(agentfs.AgentFSError, match="holds another operation"):
        d.run(problem(409, "OPERATION_IN_PROGRESS", 1), operation("completed", 200, {}, route="/v1/files/:id/restore"))


def test_steps_in_progress_without_key() -> None:
    """Without a key a request safe to repeat is sent again; a plain create stops."""
    complete = route_request(r.ROUTE_COMPLETE, "/v1/uploads/upl_1/complete")
    d = Drive(complete)
    d.run(problem(409, "OPERATION_IN_PROGRESS", 1), ok())
    assert d.kinds() == ["Send", "Sleep", "Send"]
    d = Drive(put(key=None))
    with pytest.raises(agentfs.OperationInProgressError):
        d.run(problem(409, "OPERATION_IN_PROGRESS", 1))


def test_steps_poll_failures() -> None:
    """A poll that fails retryably is retried; one that answers 401 ends the call."""
    d = Drive(put())
    d.run(problem(409, "OPERATION_IN_PROGRESS", 1), r.NoResponse(OSError("reset")),
          problem(503, "STORAGE_UNAVAILABLE", 3), operation("completed", 201, {"id": "f"}))
    assert d.kinds() == ["Send", "Sleep", "Poll", "Sleep", "Poll", "Sleep", "Poll"]
    assert d.log[5].seconds >= 3
    d = Drive(put())
    with pytest.raises(agentfs.AuthenticationError):
        d.run(problem(409, "OPERATION_IN_PROGRESS", 1), problem(401, "UNAUTHENTICATED"))


def test_steps_attempts_count_polls() -> None:
    """Polls are attempts: a key held forever ends with OPERATION_IN_PROGRESS after max_attempts."""
    d = Drive(put(), agentfs.RetryPolicy(max_attempts=4))
    with pytest.raises(agentfs.OperationInProgressError):
        d.run(problem(409, "OPERATION_IN_PROGRESS", 1), *[operation("in_progress")] * 3)
    assert d.kinds().count("Poll") == 3 and d.kinds().count("Send") == 1


def test_early_responses_read_on_old_httpcore() -> None:
    """The read-after-write-error backport applies exactly where httpcore lacks it (before 0.17.1)."""
    import httpcore
    from httpcore._sync.http11 import HTTP11Connection

    from agentfs._compat import _version, read_early_responses

    assert _version("0.16.3") < (0, 17, 1) <= _version("0.17.1") < _version("1.0.5")
    old = _version(httpcore.__version__) < (0, 17, 1)
    assert read_early_responses() is old
    assert getattr(HTTP11Connection, "_agentfs_reads_early_responses", False) is old


@pytest.mark.parametrize("value,want", [
    (None, None), (60, 60), (60.2, 61), (0.5, 1), (timedelta(hours=2), 7200), (timedelta(milliseconds=1500), 2),
])
def test_seconds_of(value: Any, want: Optional[int]) -> None:
    assert seconds_of("expires_in", value) == want


@pytest.mark.parametrize("value,error", [
    (0, ValueError), (-5, ValueError), (float("nan"), ValueError), (timedelta(0), ValueError),
    ("60", TypeError), (True, TypeError),
])
def test_seconds_of_refuses(value: Any, error: type) -> None:
    with pytest.raises(error):
        seconds_of("expires_in", value)


@pytest.mark.parametrize("doc", [
    {}, {"data": None, "next_cursor": 5}, {"data": [1, "x", None]}, {"data": [{"version": "7", "at": "yesterday"}]},
    {"data": [{"id": "evt_1", "type": "file.created", "version": True, "size_bytes": 3.5, "previous_path": 9}]},
])
def test_event_page_of_odd_json(doc: dict[str, Any]) -> None:
    """An answer that is not what the server sends gives empty fields, never a crash."""
    page = EventPage.from_dict(doc)
    assert isinstance(page.next_cursor, str)
    for e in page.data:
        assert e.version is None and e.size_bytes is None and e.previous_path is None and e.at is None


def test_run_and_link_of_odd_json() -> None:
    run = Run.from_dict({"run_id": "r", "agent_ids": ["a", 3, None], "counts": [], "live_files": "2"})
    assert (run.agent_ids, run.counts, run.live_files) == (["a"], RunCounts(), 0)
    link = Link.from_dict({"id": "lnk_1", "version": False, "url": None, "expires_at": "2026-01-02T03:04:05.123456789Z"})
    assert link.version is None and link.url is None and link.expires_at is not None
    assert link.expires_at.microsecond == 123456


def follow_state(max_attempts: int = 3) -> FollowState:
    policy = agentfs.RetryPolicy(max_attempts=max_attempts, initial_delay=1, max_delay=8)
    return FollowState(lambda cur: route_request(r.ROUTE_EVENTS, "/v1/events",
                                                 query={"after": cur} if cur else {}), "now", policy,
                       random.Random(7))


def page(after: str, *ids: str) -> r.Reply:
    body = {"data": [{"id": i, "type": "file.created", "path": i} for i in ids], "has_more": False,
            "next_cursor": after}
    return r.Reply(200, {}, body=json.dumps(body).encode())


def test_follow_state_until_connected_counts_attempts() -> None:
    st = follow_state(max_attempts=3)
    req = st.request()
    assert req.query == {"after": "now"}
    first = st.judge(req, r.NoResponse(ConnectionResetError("reset")))
    assert first is not None and 0 <= first <= 1
    hinted = st.judge(req, problem_from_dict(503, {"status": 503, "code": "STORAGE_UNAVAILABLE"}, retry_after=5))
    assert hinted == 5, "Retry-After is a floor"
    with pytest.raises(agentfs.APIConnectionError):
        st.judge(req, r.NoResponse(ConnectionResetError("reset")))
    assert st.resume_cursor() == "now"


def test_follow_state_after_connected_retries_without_limit() -> None:
    st = follow_state(max_attempts=2)
    req = st.request()
    assert st.judge(req, page("c1", "evt_1", "evt_2")) is None
    assert st.resume_cursor() == "now", "a page half handed out resumes from its start"
    assert st.next_event().id == "evt_1"  # type: ignore[union-attr]
    assert st.next_event().id == "evt_2"  # type: ignore[union-attr]
    assert st.next_event() is None and st.resume_cursor() == "c1"
    req = st.request()
    assert req.query == {"after": "c1"}
    waits = [st.judge(req, r.NoResponse(OSError("down"))) for _ in range(10)]
    assert all(w is not None and 0 <= w <= 8 for w in waits), waits
    assert st.judge(req, page("c2")) is None and st.resume_cursor() == "c2"


@pytest.mark.parametrize("status,code,retry_after", [
    (410, "CURSOR_EXPIRED", None), (401, "UNAUTHENTICATED", None), (422, "VALIDATION_FAILED", None),
    (503, "STORAGE_UNAVAILABLE", 120),  # a hint above max_delay stops
])
def test_follow_state_stops(status: int, code: str, retry_after: Optional[float]) -> None:
    st = follow_state()
    with pytest.raises(agentfs.Problem) as ei:
        st.judge(st.request(), problem_from_dict(status, {"status": status, "code": code}, retry_after=retry_after))
    assert ei.value.code == code


def test_follow_state_page_without_cursor() -> None:
    st = follow_state()
    with pytest.raises(agentfs.AgentFSError, match="no next_cursor"):
        st.judge(st.request(), r.Reply(200, {}, body=b'{"data": []}'))
