"""Upload sessions: the part plan, resume, and progress, shared by both clients."""

from __future__ import annotations

import asyncio
import hashlib
import os
import stat
import threading
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Iterator, Optional, Sequence, TypeVar

from ._errors import AgentFSError
from ._models import Upload
from ._request import CHUNK, Observer, PathBody

#: Told the bytes sent so far and the total: progress(sent, total).
ProgressCallback = Callable[[int, int], None]

J = TypeVar("J")


def regular_file_size(path: str) -> int:
    """The size of a local regular file; anything else is an error before anything is sent."""
    st = os.stat(path)
    if not stat.S_ISREG(st.st_mode):
        raise ValueError(f"{path} is not a regular file")
    return st.st_size


def sha256_of_file(path: str, offset: int = 0, size: Optional[int] = None) -> str:
    """The lowercase hex SHA-256 of size bytes of a local file from offset (to its end when None)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        f.seek(offset)
        left = size
        while left is None or left > 0:
            chunk = f.read(CHUNK if left is None else min(CHUNK, left))
            if not chunk:
                break
            h.update(chunk)
            if left is not None:
                left -= len(chunk)
    if left:
        raise AgentFSError(f"{path} ended {left} bytes early; was it changed during the upload?")
    return h.hexdigest()


def check_plan(u: Upload, size: int) -> None:
    """Make sure the session is one this content can fill."""
    if u.status != "pending":
        raise AgentFSError(f"upload {u.id} is {u.status}, not pending")
    if u.size_bytes != size or u.part_size < 1 or u.part_count != -(-size // u.part_size):
        raise AgentFSError(
            f"upload {u.id} has an unusable part plan: {u.size_bytes} bytes in {u.part_count} parts of {u.part_size}"
        )


@dataclass(frozen=True)
class PartJob:
    """One part to make sure of: sent, or found already stored with the same bytes."""

    number: int
    offset: int
    size: int
    #: The SHA-256 the session holds for it, if any.
    stored: Optional[str]


def part_jobs(u: Upload) -> list[PartJob]:
    """The session's parts in order, with what it already holds of each."""
    stored = {p.part_number: p.sha256 for p in u.parts}
    jobs = []
    for n in range(1, u.part_count + 1):
        off = (n - 1) * u.part_size
        jobs.append(PartJob(n, off, min(u.part_size, u.size_bytes - off), stored.get(n)))
    return jobs


class Progress:
    """Adds up the bytes every part sent and tells the callback, never two calls at once."""

    def __init__(self, fn: Optional[ProgressCallback], total: int) -> None:
        self.fn = fn
        self.total = total
        self.sent = 0
        self._lock = threading.Lock()

    def add(self, n: int) -> None:
        """n more bytes were sent (negative: taken back for a part to be sent again)."""
        if self.fn is None or n == 0:
            return
        with self._lock:
            self.sent += n
            self.fn(self.sent, self.total)

    def finish(self) -> None:
        """Report the total once everything is stored."""
        if self.fn is None:
            return
        with self._lock:
            self.sent = self.total
            self.fn(self.sent, self.total)


class PartCounter(Observer):
    """Counts one body's bytes as progress; a new attempt takes back what the last one counted."""

    def __init__(self, progress: Progress) -> None:
        self.progress = progress
        self.counted = 0
        self._lock = threading.Lock()

    def restart(self) -> None:
        self.settle(0)

    def add(self, n: int) -> None:
        with self._lock:
            self.counted += n
        self.progress.add(n)

    def settle(self, n: int) -> None:
        """Make the body count for exactly n bytes: all once stored, none while it is to be sent (again)."""
        with self._lock:
            d = n - self.counted
            self.counted = n
        self.progress.add(d)


@contextmanager
def counted_section(path: str, offset: int, size: int, progress: Progress) -> Iterator[tuple[PathBody, PartCounter]]:
    """A part's body read from the local file, its bytes counted as progress; taken back if the block raises."""
    body = PathBody(path, offset, size)
    counter = PartCounter(progress)
    body.observer = counter
    try:
        yield body, counter
    except BaseException:
        counter.settle(0)
        raise


def check_stored(upload_id: str, number: int, got: str, want: str) -> None:
    """The server must have stored the bytes that were sent."""
    if got != want:
        raise AgentFSError(f"upload {upload_id}: the server stored part {number} with SHA-256 {got}, not {want}")


def run_parallel(send: Callable[[J], Any], jobs: Sequence[J], parallel: int) -> None:
    """Call send(job) for every job, parallel at a time on threads (Client's parts).

    The first failure stops the jobs not started yet; it is raised once those
    running have ended.
    """
    failed = threading.Event()
    lock = threading.Lock()
    first: list[BaseException] = []

    def run(job: J) -> None:
        if failed.is_set():
            return
        try:
            send(job)
        except BaseException as e:  # the first failure stops the rest
            with lock:
                if not first:
                    first.append(e)
            failed.set()

    with ThreadPoolExecutor(max_workers=max(1, min(parallel, len(jobs)))) as pool:
        list(pool.map(run, jobs))
    if first:
        raise first[0]


async def arun_parallel(send: Callable[[J], Awaitable[Any]], jobs: Sequence[J], parallel: int) -> None:
    """Await send(job) for every job, parallel at a time as asyncio tasks (AsyncClient's parts).

    The first failure cancels the other tasks and is raised once they have ended.
    """
    todo = iter(jobs)

    async def worker() -> None:
        for job in todo:  # shared: each job goes to one worker
            await send(job)

    tasks = [asyncio.create_task(worker()) for _ in range(max(1, min(parallel, len(jobs))))]
    try:
        await asyncio.gather(*tasks)
    except BaseException:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise
