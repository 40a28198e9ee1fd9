"""Following the event feed: long polls, next_cursor, and riding out failures, for both clients.

``FollowState`` decides; ``EventFollower`` (threads) and ``AsyncEventFollower``
(asyncio) only send the polls it asks for, wait the waits it asks for, and
hand out the events it keeps. So the rules (which failures are retried, with
which backoff, and where the cursor stands) are written once.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import deque
from typing import TYPE_CHECKING, Any, Callable, Optional

from ._errors import AgentFSError, APIConnectionError, Problem
from ._models import Event, EventPage
from ._request import Request
from ._retry import (
    ROUTE_EVENTS,
    Call,
    Delays,
    NoResponse,
    Outcome,
    RandomSource,
    Reply,
    Result,
    RetryPolicy,
    Verdict,
    classify,
)

if TYPE_CHECKING:  # pragma: no cover
    from ._async_client import AsyncClient
    from ._client import Client

__all__ = ["FollowState", "EventFollower", "AsyncEventFollower"]


class FollowState:
    """Where a follower stands in the feed, and what to do after each poll.

    ``cursor`` is the position after every event handed out; ``pending``
    holds the rest of the last page. Failures that asking again can mend (a
    dropped connection, 408, 429, 5xx) get a wait from the retry policy's
    backoff: full jitter over a doubling delay, the server's Retry-After as
    a floor. Until some poll has answered they count against
    ``policy.max_attempts`` (so a wrong URL fails); after that they are
    retried without limit (so an outage or a restart of any length is
    waited out). Anything else ends the following with its error.
    """

    def __init__(self, make_request: Callable[[Optional[str]], Request], after: Optional[str],
                 policy: RetryPolicy, rng: RandomSource) -> None:
        self._make_request = make_request
        self._policy = policy
        self._rng = rng
        self._lock = threading.Lock()
        self.cursor = after
        self.page_start = after
        self.pending: deque[Event] = deque()
        self.connected = False
        self._delays = Delays(policy, rng)
        self._failures = 0

    def resume_cursor(self) -> Optional[str]:
        """The cursor to follow again from: exact once the last page is handed out whole.

        While some of it is still pending, it is where that page began, so
        following again from it repeats what this page already gave, and
        never skips anything.
        """
        with self._lock:
            return self.page_start if self.pending else self.cursor

    def next_event(self) -> Optional[Event]:
        """The next event of the last page, or None."""
        with self._lock:
            return self.pending.popleft() if self.pending else None

    def request(self) -> Request:
        """The poll after the cursor."""
        with self._lock:
            return self._make_request(self.cursor)

    def judge(self, req: Request, out: Outcome) -> Optional[float]:
        """Take one poll's outcome.

        Returns None when a page came (its events are pending now), or the
        seconds to wait before asking again from the same cursor. Raises
        what ends the following.
        """
        if isinstance(out, Reply):
            data = out.json()
            page = EventPage.from_dict(data if isinstance(data, dict) else {})
            if not page.next_cursor:
                raise AgentFSError(f"{req.method} {req.path}: the page of events has no next_cursor")
            with self._lock:
                self.page_start = req.query.get("after")
                self.cursor = page.next_cursor
                self.pending.extend(page.data)
                self.connected = True
            self._failures = 0
            self._delays = Delays(self._policy, self._rng)
            return None
        err: BaseException
        if isinstance(out, Problem):
            v = classify(Call(ROUTE_EVENTS), Result(out.status, out.code, out.retry_after), self._policy.max_delay)
            if v is not Verdict.RETRY:
                raise out
            err, hint = out, out.retry_after
        elif isinstance(out, NoResponse):
            err = APIConnectionError(f"{req.method} {req.path}: {str(out.error) or type(out.error).__name__}")
            err.__cause__ = out.error
            hint = None
        else:
            raise TypeError(f"a poll of the event feed was answered with {out!r}")
        self._failures += 1
        if not self.connected and self._failures >= self._policy.max_attempts:
            raise err
        self._delays.at_least(hint)
        return self._delays.next()


class EventFollower:
    """Follows the event feed from a cursor on, for as long as you iterate it.

    Iterating it yields events as they commit, oldest first: it long-polls
    GET /v1/events with ``wait``, follows each page's ``next_cursor``, and
    rides out dropped connections and server restarts by asking again from
    the last cursor, so the events it yields have no gap and no repeat.
    Problems that retrying cannot mend (CursorExpiredError, a bad filter,
    AuthenticationError) are raised; iterating again goes on from
    ``cursor``. ``close()`` (from any thread) or leaving a ``with`` block
    stops it, also in the middle of a poll. Make one with
    ``Client.follow_events``.
    """

    def __init__(self, client: "Client", state: FollowState) -> None:
        self._client = client
        self._state = state
        self._closed = threading.Event()
        self._lock = threading.Lock()
        self._wake: Optional[threading.Event] = None

    @property
    def cursor(self) -> Optional[str]:
        """Where the follower stands: following again from it (``after=``) yields what this one has not yielded.

        It is the ``after`` it started from until the first poll answers.
        When iteration stopped in the middle of a page, it is that page's
        start, so the events of that page already yielded come again.
        """
        return self._state.resume_cursor()

    @property
    def closed(self) -> bool:
        """Whether close() was called."""
        return self._closed.is_set()

    def close(self) -> None:
        """Stop following; a poll in progress is abandoned, and iteration ends."""
        self._closed.set()
        with self._lock:
            if self._wake is not None:
                self._wake.set()

    def __enter__(self) -> "EventFollower":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __iter__(self) -> "EventFollower":
        return self

    def __next__(self) -> Event:
        while True:
            if self._closed.is_set():
                raise StopIteration
            e = self._state.next_event()
            if e is not None:
                return e
            req = self._state.request()
            out = self._poll(req)
            if self._closed.is_set():
                raise StopIteration
            wait = self._state.judge(req, out)
            if wait is not None and not self._sleep(wait):
                raise StopIteration

    def _poll(self, req: Request) -> Outcome:
        """Send one poll on a thread of its own, so that close() need not wait for the server's answer."""
        box: dict[str, Any] = {}
        wake = threading.Event()
        with self._lock:
            self._wake = wake

        def send() -> None:
            try:
                box["out"] = self._client._send_once(req, False)
            except BaseException as e:  # handed to the iterating thread
                box["err"] = e
            finally:
                wake.set()

        threading.Thread(target=send, name="agentfs-events-poll", daemon=True).start()
        wake.wait()
        with self._lock:
            self._wake = None
        if "err" in box:
            raise box["err"]
        return box.get("out")

    def _sleep(self, seconds: float) -> bool:
        """Wait before asking again; False when closed meanwhile."""
        if self._client._sleep is time.sleep:
            return not self._closed.wait(seconds)
        self._client._sleep(seconds)
        return not self._closed.is_set()


def _cancelled_from_outside() -> bool:
    """Whether the current task itself is being cancelled (Python 3.11+; earlier: unknown, so no)."""
    task = asyncio.current_task()
    cancelling = getattr(task, "cancelling", None)
    return bool(cancelling()) if cancelling is not None else False


class AsyncEventFollower:
    """The asyncio twin of EventFollower: ``async for`` yields events as they commit.

    Cancelling the task that iterates it, or ``await aclose()`` from any
    task, stops it, also in the middle of a poll or of a retry wait. Make one
    with ``AsyncClient.follow_events``.
    """

    def __init__(self, client: "AsyncClient", state: FollowState) -> None:
        self._client = client
        self._state = state
        self._closed = False
        self._task: Optional["asyncio.Future[Any]"] = None

    @property
    def cursor(self) -> Optional[str]:
        """Where the follower stands; see EventFollower.cursor."""
        return self._state.resume_cursor()

    @property
    def closed(self) -> bool:
        """Whether aclose() was called."""
        return self._closed

    async def aclose(self) -> None:
        """Stop following; a poll or a wait in progress is cancelled, and iteration ends."""
        self._closed = True
        if self._task is not None:
            self._task.cancel()

    async def __aenter__(self) -> "AsyncEventFollower":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()

    def __aiter__(self) -> "AsyncEventFollower":
        return self

    async def __anext__(self) -> Event:
        while True:
            if self._closed:
                raise StopAsyncIteration
            e = self._state.next_event()
            if e is not None:
                return e
            req = self._state.request()
            done, out = await self._closable(self._client._send_once(req, False))
            if not done:
                raise StopAsyncIteration
            wait = self._state.judge(req, out)
            if wait is not None:
                done, _ = await self._closable(self._client._sleep(wait))
                if not done:
                    raise StopAsyncIteration

    async def _closable(self, aw: Any) -> "tuple[bool, Any]":
        """Await aw as a task that aclose() may cancel; (False, None) when it did."""
        self._task = asyncio.ensure_future(aw)
        try:
            return True, await self._task
        except asyncio.CancelledError:
            if self._closed and not _cancelled_from_outside():
                return False, None
            raise
        finally:
            self._task = None

