"""The client retry policy, written once for both clients.

``retry_steps`` is a generator that decides; the sync and the async client
only carry out what it yields (send the request, poll the key, sleep) and
send back what happened. So the policy is one piece of code, and unit tests
drive it step by step without a network or a clock.
"""

from __future__ import annotations

import email.utils
import json
import random as _random
import re
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from enum import Enum
from typing import Any, Generator, Mapping, Optional, Protocol as _Proto, Union

from ._errors import (
    APIConnectionError,
    AgentFSError,
    BodyNotRewindableError,
    Problem,
    problem_from_dict,
    retryable_status,
)
from ._models import Operation

__all__ = ["RetryPolicy", "DEFAULT_RETRY", "classify", "Verdict", "Call", "Delays", "parse_retry_after"]

#: Largest cap the contract allows for the doubling delay (the client retry policy).
MAX_MAX_DELAY = 60.0

#: Absurd Retry-After hints are clamped to this; any hint that long stops retrying.
MAX_RETRY_AFTER = 365 * 24 * 3600.0


@dataclass(frozen=True)
class RetryPolicy:
    """How the client repeats a request; the defaults are the server's advertised policy.

    Every wait is a random time between zero and the current delay (full
    jitter), raised to the server's Retry-After when that is longer: the
    client never waits less than the server asked. A Retry-After above
    ``max_delay`` stops the retries and raises the problem.
    ``RetryPolicy(max_attempts=1)`` turns retries off.
    """

    #: Attempts of one call, the first included. A poll of /v1/operations/{key}
    #: is an attempt too; one that finds nothing is followed at once by the write.
    max_attempts: int = 8
    #: Seconds: the delay bound before the first retry.
    initial_delay: float = 1.0
    #: Seconds: caps the doubling delay and the Retry-After the client accepts; at most 60.
    max_delay: float = 30.0

    def __post_init__(self) -> None:
        if not isinstance(self.max_attempts, int) or self.max_attempts < 1:
            raise ValueError(f"RetryPolicy: max_attempts {self.max_attempts!r} is below 1")
        if self.initial_delay < 0:
            raise ValueError(f"RetryPolicy: initial_delay {self.initial_delay!r} is negative")
        if self.max_delay > MAX_MAX_DELAY:
            raise ValueError(f"RetryPolicy: max_delay {self.max_delay!r} is above {MAX_MAX_DELAY:g} s")
        if self.max_delay < self.initial_delay:
            raise ValueError(
                f"RetryPolicy: max_delay {self.max_delay!r} is below initial_delay {self.initial_delay!r}"
            )


DEFAULT_RETRY = RetryPolicy()

# Routes the client sends, named as in the API (openapi.yaml); they key the classification.
ROUTE_PROTOCOL = "GET /v1/protocol"
ROUTE_PUT_FILE = "POST /v1/files"
ROUTE_LIST_FILES = "GET /v1/files"
ROUTE_FILE = "GET /v1/files/{id}"
ROUTE_FILE_CONTENT = "GET /v1/files/{id}/content"
ROUTE_DELETE_FILE = "DELETE /v1/files/{id}"
ROUTE_RESTORE_FILE = "POST /v1/files/{id}/restore"
ROUTE_OPERATION = "GET /v1/operations/{idempotency_key}"
ROUTE_CREATE_UPLOAD = "POST /v1/uploads"
ROUTE_UPLOAD = "GET /v1/uploads/{id}"
ROUTE_UPLOAD_PART = "PUT /v1/uploads/{id}/parts/{n}"
ROUTE_COMPLETE = "POST /v1/uploads/{id}/complete"
ROUTE_ABORT_UPLOAD = "DELETE /v1/uploads/{id}"
ROUTE_CREATE_BATCH = "POST /v1/batch"
ROUTE_BATCH = "GET /v1/batch/{id}"
ROUTE_LIST_UPLOADS = "GET /v1/uploads"
ROUTE_LIST_BATCHES = "GET /v1/batch"
ROUTE_CANCEL_BATCH = "POST /v1/batch/{id}/cancel"
ROUTE_LIST_VERSIONS = "GET /v1/files/{id}/versions"
ROUTE_VERSION = "GET /v1/files/{id}/versions/{n}"
ROUTE_VERSION_CONTENT = "GET /v1/files/{id}/versions/{n}/content"
ROUTE_REVERT = "POST /v1/files/{id}/revert"
ROUTE_MOVE = "POST /v1/files/{id}/move"
ROUTE_PATCH_FILE = "PATCH /v1/files/{id}"
ROUTE_CREATE_LINK = "POST /v1/files/{id}/links"
ROUTE_LINKS = "GET /v1/files/{id}/links"
ROUTE_REVOKE_LINK = "DELETE /v1/links/{id}"
ROUTE_EVENTS = "GET /v1/events"
ROUTE_LIST_RUNS = "GET /v1/runs"
ROUTE_RUN = "GET /v1/runs/{run_id}"
ROUTE_RUN_ARCHIVE = "GET /v1/runs/{run_id}/archive"
ROUTE_RUN_RECOVERY = "GET /v1/runs/{run_id}/recovery"
ROUTE_REVERT_RUN = "POST /v1/runs/{run_id}/revert"
ROUTE_SEARCH = "GET /v1/search"
ROUTE_CREATE_TOKEN = "POST /v1/tokens"
ROUTE_TOKENS = "GET /v1/tokens"
ROUTE_TOKEN = "GET /v1/tokens/{id}"
ROUTE_REVOKE_TOKEN = "DELETE /v1/tokens/{id}"
ROUTE_CREATE_CHECKPOINT = "POST /v1/checkpoints"
ROUTE_LIST_CHECKPOINTS = "GET /v1/checkpoints"
ROUTE_CHECKPOINT = "GET /v1/checkpoints/{id}"
ROUTE_DELETE_CHECKPOINT = "DELETE /v1/checkpoints/{id}"
ROUTE_DIFF = "GET /v1/diff"
ROUTE_RESTORE = "POST /v1/restore"
ROUTE_CREATE_WEBHOOK = "POST /v1/webhooks"
ROUTE_WEBHOOKS = "GET /v1/webhooks"
ROUTE_WEBHOOK = "GET /v1/webhooks/{id}"
ROUTE_UPDATE_WEBHOOK = "PATCH /v1/webhooks/{id}"
ROUTE_DELETE_WEBHOOK = "DELETE /v1/webhooks/{id}"
ROUTE_ROTATE_WEBHOOK = "POST /v1/webhooks/{id}/rotate-secret"
ROUTE_REPLAY_WEBHOOK = "POST /v1/webhooks/{id}/replay"
ROUTE_WEBHOOK_DELIVERIES = "GET /v1/webhooks/{id}/deliveries"
ROUTE_CREATE_FORK = "POST /v1/forks"
ROUTE_LIST_FORKS = "GET /v1/forks"
ROUTE_FORK = "GET /v1/forks/{id}"
ROUTE_DELETE_FORK = "DELETE /v1/forks/{id}"
ROUTE_MERGE = "POST /v1/forks/{id}/merge"

_SAFE_WITHOUT_KEY = {
    ROUTE_DELETE_FILE,
    ROUTE_RESTORE_FILE,
    ROUTE_CREATE_UPLOAD,
    ROUTE_UPLOAD_PART,
    ROUTE_COMPLETE,
    ROUTE_ABORT_UPLOAD,
    # Revoking a link or cancelling a batch again changes nothing; a PATCH
    # sets an absolute expires_at, so a repeat sets the same value.
    ROUTE_REVOKE_LINK,
    ROUTE_REVOKE_TOKEN,
    ROUTE_CANCEL_BATCH,
    ROUTE_PATCH_FILE,
}

CODE_IN_PROGRESS = "OPERATION_IN_PROGRESS"


@dataclass(frozen=True)
class Call:
    """What the classification knows about a request."""

    route: str
    #: Carries an Idempotency-Key.
    keyed: bool = False
    #: An upload with if_exists=replace.
    replace: bool = False

    def safe_to_repeat(self) -> bool:
        """Whether the request may be sent again when its outcome is unknown: its effect cannot happen twice."""
        if self.route.startswith(("GET ", "HEAD ")) or self.keyed:
            return True
        if self.route == ROUTE_PUT_FILE:
            return self.replace
        return self.route in _SAFE_WITHOUT_KEY


class Verdict(Enum):
    """What to do after an attempt."""

    STOP = "stop"
    RETRY = "retry"
    POLL = "poll"


@dataclass(frozen=True)
class Result:
    """What one attempt ended with, as the classification sees it."""

    #: 0: no response (the connection failed).
    status: int = 0
    code: Optional[str] = None
    retry_after: Optional[float] = None
    #: The request body was (partly) sent and cannot be re-read.
    body_lost: bool = False


def classify(call: Call, r: Result, max_delay: float) -> Verdict:
    """The whole retry policy for one attempt.

    408, 429 and 5xx are retried; a failed connection only when the request
    is safe to repeat; OPERATION_IN_PROGRESS is answered by polling the key,
    or, without a key, by sending again a request that is safe to repeat;
    every other status stops. A body that cannot be sent again stops
    everything but a poll, and so does a Retry-After above max_delay.
    """
    if r.retry_after is not None and r.retry_after > max_delay:
        return Verdict.STOP
    if r.status == 409 and r.code == CODE_IN_PROGRESS:
        if call.keyed:
            return Verdict.POLL
        if call.safe_to_repeat() and not r.body_lost:
            return Verdict.RETRY
        return Verdict.STOP
    if r.body_lost:
        return Verdict.STOP
    if r.status == 0:
        return Verdict.RETRY if call.safe_to_repeat() else Verdict.STOP
    if retryable_status(r.status):
        return Verdict.RETRY
    return Verdict.STOP


class RandomSource(_Proto):
    """Anything with ``uniform(a, b)``: ``random.Random`` or a seeded one in tests."""

    def uniform(self, a: float, b: float) -> float: ...


class Delays:
    """The waits of one call: full jitter over a delay doubling from initial_delay to max_delay.

    A server's Retry-After raises the next wait to at least that hint.
    """

    def __init__(self, policy: RetryPolicy, rng: RandomSource) -> None:
        self.policy = policy
        self.rng = rng
        self.current = policy.initial_delay
        self.floor = 0.0

    def next(self) -> float:
        """The wait before the next attempt."""
        wait = self.rng.uniform(0.0, self.current) if self.current > 0 else 0.0
        wait = min(max(wait, 0.0), self.current)
        self.current = min(2 * self.current, self.policy.max_delay)
        wait, self.floor = max(wait, self.floor), 0.0
        return wait

    def at_least(self, hint: Optional[float]) -> None:
        """Make the next wait no shorter than a server's hint."""
        self.floor = hint or 0.0


def parse_retry_after(value: Optional[str], now: Optional[float] = None) -> Optional[float]:
    """Read Retry-After, delay-seconds or an HTTP date, as seconds from now.

    Absent, malformed or past values are None.
    """
    if value is None:
        return None
    v = value.strip()
    if not v:
        return None
    if re.fullmatch(r"[0-9]+", v):
        secs = float(min(int(v), int(MAX_RETRY_AFTER)))
        return secs if secs > 0 else None
    if re.fullmatch(r"-[0-9]+", v):
        return None
    try:
        at = email.utils.parsedate_to_datetime(v)
    except (TypeError, ValueError, IndexError):
        return None
    if at is None:
        return None
    if at.tzinfo is None:
        at = at.replace(tzinfo=timezone.utc)
    now_dt = datetime.fromtimestamp(time.time() if now is None else now, tz=timezone.utc)
    d = (at - now_dt).total_seconds()
    return min(d, MAX_RETRY_AFTER) if d > 0 else None


_PLACEHOLDER = re.compile(r"\{([a-z_]+)\}")


def server_route(route: str) -> str:
    """Turn "POST /v1/files/{id}/restore" into the template the server records, "/v1/files/:id/restore"."""
    _, _, path = route.partition(" ")
    return _PLACEHOLDER.sub(r":\1", path)


# What the clients are asked to do.


@dataclass(frozen=True)
class Send:
    """Send the request once and report a Reply, a Problem or a NoResponse."""


@dataclass(frozen=True)
class Poll:
    """GET /v1/operations/{key} once and report a Reply, a Problem or a NoResponse."""

    key: str


@dataclass(frozen=True)
class Sleep:
    """Wait this many seconds, then report None."""

    seconds: float


Step = Union[Send, Poll, Sleep]


@dataclass
class Reply:
    """A successful answer. ``body`` holds the bytes unless ``stream`` is the open response."""

    status: int
    headers: Mapping[str, str]
    body: Optional[bytes] = None
    stream: Any = None

    def json(self) -> Any:
        """The body as JSON."""
        if self.body is None:
            raise AgentFSError("the response body was streamed, not read")
        try:
            return json.loads(self.body.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as e:
            raise AgentFSError(f"decode {self.status} response: {e}") from e


@dataclass
class NoResponse:
    """The connection failed or broke before a (whole) answer came."""

    error: BaseException


Outcome = Union[Reply, Problem, NoResponse, None]


class RetryableRequest(_Proto):
    """What the steps need to know of a request."""

    method: str
    path: str
    route: str
    key: Optional[str]

    @property
    def call(self) -> Call: ...

    def body_lost(self) -> bool: ...


def _connection_error(req: RetryableRequest, err: BaseException, note: str = "") -> APIConnectionError:
    cls = BodyNotRewindableError if note else APIConnectionError
    msg = f"{req.method} {req.path}: {err}" if str(err) else f"{req.method} {req.path}: {type(err).__name__}"
    e = cls(msg + note)
    e.__cause__ = err
    return e


_NOT_REWINDABLE = "; the request body was sent and cannot be re-read, so it is not sent again"


def retry_steps(
    req: RetryableRequest, policy: RetryPolicy, rng: RandomSource
) -> Generator[Step, Outcome, Reply]:
    """Decide, one step at a time, how one logical request is sent (the client retry policy).

    Yields Send, Poll and Sleep; receives what each Send or Poll ended with.
    Returns the successful Reply, or raises the Problem or connection error
    that ends the call. At most ``policy.max_attempts`` sends and polls.
    """
    delays = Delays(policy, rng)
    busy: Optional[Problem] = None  # the OPERATION_IN_PROGRESS being polled for
    last: Optional[BaseException] = None
    for attempt in range(policy.max_attempts):
        if attempt > 0:
            yield Sleep(delays.next())
        if busy is not None and req.key:
            polled = yield Poll(req.key)
            decision = _judge_poll(req, polled, busy, delays, policy)
            if isinstance(decision, Reply):
                return decision
            if decision is not None:
                last = decision
                continue
            busy = None  # the key holds nothing (nothing happened), or withholds a secret: send the write again
        if req.body_lost():
            raise _connection_error(req, AgentFSError("an earlier attempt failed"), _NOT_REWINDABLE)
        out = yield Send()
        if isinstance(out, Reply):
            return out
        if isinstance(out, Problem):
            v = classify(req.call, Result(out.status, out.code, out.retry_after, req.body_lost()), policy.max_delay)
            if v is Verdict.RETRY:
                delays.at_least(out.retry_after)
                last = out
                continue
            if v is Verdict.POLL:
                busy = out
                delays.at_least(out.retry_after)
                last = out
                continue
            raise out
        if isinstance(out, NoResponse):
            lost = req.body_lost()
            v = classify(req.call, Result(body_lost=lost), policy.max_delay)
            if v is Verdict.RETRY:
                last = _connection_error(req, out.error)
                continue
            note = _NOT_REWINDABLE if lost and req.call.safe_to_repeat() else ""
            raise _connection_error(req, out.error, note)
        raise TypeError(f"retry_steps: a Send was answered with {out!r}")
    assert last is not None
    raise last


def _judge_poll(
    req: RetryableRequest, out: Outcome, busy: Problem, delays: Delays, policy: RetryPolicy
) -> Union[Reply, BaseException, None]:
    """Read one poll of /v1/operations/{key}.

    Returns the recorded answer once the key has one, an error to retry
    after while it has none yet, and None when the write is to be sent
    again: when the key holds nothing, which proves that nothing happened,
    or when its recorded answer withholds a secret (a link's url), which
    only a replay of the request by this token answers. Raises what ends
    the call.
    """
    if isinstance(out, Problem):
        if out.status == 404:
            return None
        v = classify(Call(ROUTE_OPERATION), Result(out.status, out.code, out.retry_after), policy.max_delay)
        if v is Verdict.RETRY:
            delays.at_least(out.retry_after)
            return out
        raise out
    if isinstance(out, NoResponse):
        return _connection_error(req, out.error)  # a read: safe to repeat
    if not isinstance(out, Reply):
        raise TypeError(f"retry_steps: a Poll was answered with {out!r}")
    data = out.json()
    op = Operation.from_dict(data if isinstance(data, Mapping) else {})
    if op.method != req.method or op.route != server_route(req.route):
        raise AgentFSError(
            f"{req.method} {req.path}: idempotency key {req.key!r} holds another operation, {op.method} {op.route}"
        )
    if not op.completed:
        delays.at_least(busy.retry_after)
        return busy
    if op.response_status is None:
        raise AgentFSError(f"{req.method} {req.path}: completed operation without a response status")
    if op.redacted:
        return None  # the same key replays it, secret and all
    if op.response_status >= 400:
        body = op.response if isinstance(op.response, Mapping) else {}
        raise problem_from_dict(op.response_status, body)
    return Reply(
        status=op.response_status,
        headers={"content-type": "application/json", "idempotent-replayed": "true"},
        body=op.recorded_body(),
    )


def default_random() -> RandomSource:
    """A fresh random source for the jitter."""
    return _random.Random()
