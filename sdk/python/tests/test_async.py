"""AsyncClient parity: the same routes, uploads, batches and retry policy, awaited."""

from __future__ import annotations

import asyncio
import io
import time
from pathlib import Path
from typing import Any, AsyncIterator, Callable

import pytest

import agentfs
from conftest import PART_SIZE, AsyncSleeper, Bundle, expect_problem, local_file, sha
from faultproxy import FaultProxy, answer_problem, drop_after_commit, hold_until
from test_faults import SlowUpload, answered_in_progress, polled_in_progress
from test_uploads import ProgressLog, is_part, part_numbers, part_puts


async def async_wait_until(what: str, cond: Callable[[], bool], timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"never saw {what}")
        await asyncio.sleep(0.01)  # polling other tasks' progress


async def test_async_files(bundle: Bundle, tmp_path: Path) -> None:
    async with bundle.async_client(agent_id="agent-a", run_id="run-1") as c:
        f = await c.put_file("a/one.txt", b"first draft", content_type="text/plain")
        assert (f.sha256, f.agent_id, f.run_id, f.version) == (sha(b"first draft"), "agent-a", "run-1", 1)
        assert (await c.get_file(f.id)).etag == f.etag

        local = tmp_path / "two.txt"
        local.write_bytes(b"from disk")
        assert (await c.put_file("a/two.txt", local)).sha256 == sha(b"from disk")

        async def chunks() -> AsyncIterator[bytes]:
            for part in (b"async ", b"stream"):
                yield part

        assert (await c.put_file("a/three.txt", chunks())).sha256 == sha(b"async stream")
        for i in range(3):
            await c.put_file(f"a/many/{i}", b"x")

        page = await c.list_files(prefix="a/", limit=2)
        assert isinstance(page, agentfs.AsyncPage) and page.has_more
        paths = [g.path async for g in page]
        assert paths == ["a/many/2", "a/many/1", "a/many/0", "a/three.txt", "a/two.txt", "a/one.txt"]

        async with await c.file_content(f.id, range="bytes=6-") as part:
            assert b"".join([b async for b in part.aiter_bytes()]) == b"draft"
        assert (part.status, part.content_range, part.sha256) == (206, "bytes 6-10/11", f.sha256)
        buf = io.BytesIO()
        assert await c.download_file(f.id, buf) == 11 and buf.getvalue() == b"first draft"
        dest = tmp_path / "down.txt"
        assert await c.download_file(f.id, dest) == 11 and dest.read_bytes() == b"first draft"

        with pytest.raises(agentfs.PathExistsError) as ei:
            await c.put_file("a/one.txt", b"again")
        assert expect_problem(ei.value, 409, "PATH_EXISTS").existing_file_id == f.id
        r = await c.put_file("a/one.txt", b"final", if_exists="replace")
        assert (r.id, r.version) == (f.id, 2)
        assert (await c.delete_file(f.id)).deleted_at is not None
        with pytest.raises(agentfs.NotFoundError):
            await c.file_content(f.id)
        assert (await c.restore_file(f.id)).deleted_at is None

        await c.put_file("a/keyed.txt", b"k", idempotency_key="async-op-1")
        op = await c.get_operation("async-op-1")
        assert op.completed and isinstance(op.outcome(), agentfs.File)
        with pytest.raises(agentfs.NotFoundError):
            await c.get_operation("async-never")
        assert (await c.protocol()).api_version == "v1"


async def test_async_retries(bundle: Bundle) -> None:
    sleeper = AsyncSleeper()
    async with bundle.async_client(sleep=sleeper) as c:
        bundle.proxy.inject("POST", "/v1/files", 2, answer_problem(503, "STORAGE_UNAVAILABLE", "1"))
        f = await c.put_file("r/a.txt", b"hello")
        posts = bundle.proxy.requests("POST", "/v1/files")
        assert [p.status for p in posts] == [503, 503, 201] and len({p.key for p in posts}) == 1
        assert len(sleeper.waits) == 2 and all(w >= 1 for w in sleeper.waits)
        bundle.expect_one_file("r/a.txt", f.id)

        bundle.proxy.inject("POST", "/v1/files", 1, drop_after_commit)
        g = await c.put_file("r/lost.txt", b"lost")
        posts = bundle.proxy.requests("POST", "/v1/files")[3:]
        assert len(posts) == 2 and posts[0].status == 0 and posts[1].replayed and posts[0].key == posts[1].key
        bundle.expect_one_file("r/lost.txt", g.id)

        with pytest.raises(agentfs.UnprocessableEntityError):
            await c.put_file("/abs", b"x")
        assert len(bundle.proxy.requests("POST", "/v1/files")) == 6

    async with bundle.async_client(idempotency_keys=False) as plain:
        bundle.proxy.inject("POST", "/v1/files", 1, drop_after_commit)
        with pytest.raises(agentfs.APIConnectionError):
            await plain.put_file("r/plain.txt", b"once")
        assert len(bundle.proxy.requests("POST", "/v1/files")) == 7


async def test_async_cancel_interrupts_wait(bundle: Bundle) -> None:
    """Cancelling the task during a 59 s Retry-After wait ends the call at once, without another attempt."""
    c = bundle.async_client(sleep=asyncio.sleep, retry=agentfs.RetryPolicy(initial_delay=0.01, max_delay=60))
    bundle.proxy.inject("POST", "/v1/files", 10, answer_problem(503, "STORAGE_UNAVAILABLE", "59"))
    task = asyncio.create_task(c.put_file("waiting.txt", b"x"))
    await async_wait_until("the first attempt answered",
                           lambda: [s.status for s in bundle.proxy.requests("POST", "/v1/files")] == [503])
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 30)
    assert len(bundle.proxy.requests("POST", "/v1/files")) == 1
    await c.aclose()


async def test_async_polls_operation_in_progress(bundle: Bundle) -> None:
    sleeper = AsyncSleeper(free=1)
    async with bundle.async_client(sleep=sleeper, retry=agentfs.RetryPolicy(initial_delay=0.01, max_delay=10)) as c:
        slow = await asyncio.to_thread(SlowUpload, bundle, "slow.txt", "async-slow-1", b"first half ")
        task = asyncio.create_task(c.put_file("slow.txt", b"first half second half", idempotency_key="async-slow-1"))
        await async_wait_until("OPERATION_IN_PROGRESS and a poll while in progress",
                               lambda: answered_in_progress(bundle) and polled_in_progress(bundle, "async-slow-1"))
        assert await asyncio.to_thread(slow.finish, b"second half") == 201
        sleeper.release()
        f = await task
    assert f.sha256 == sha(b"first half second half")
    assert len(bundle.proxy.requests("POST", "/v1/files")) == 1
    assert len(bundle.proxy.requests("GET", "/v1/operations/async-slow-1")) >= 2
    bundle.expect_one_file("slow.txt", f.id)


async def test_async_upload_file(bundle: Bundle, tmp_path: Path) -> None:
    size = 2 * PART_SIZE + 4321
    local, data, digest = local_file(tmp_path, size, 11)

    def another_part(p: FaultProxy) -> bool:
        return any(not s.path.endswith("/parts/1") for s in p.where(lambda s: s.method == "PUT"))

    def stored(p: FaultProxy) -> bool:
        done = p.where(lambda s: s.method == "PUT" and s.status == 200)
        return {s.path.rsplit("/", 1)[1] for s in done} >= {"1", "2"}

    fail = answer_problem(500, "INTERNAL")

    def fail_once_1_and_2_stored(p: FaultProxy, h: Any, rec: Any) -> None:
        hold_until(stored, forward=False)(p, h, rec)
        fail(p, h, rec)

    bundle.proxy.inject_where(is_part(1), 1, hold_until(another_part))
    # Part 3 fails for good on the first call, once the others are stored: the session is left for a resume.
    bundle.proxy.inject_where(is_part(3), 2, fail_once_1_and_2_stored)
    flaky = bundle.async_client(run_id="run-async",
                                retry=agentfs.RetryPolicy(max_attempts=2, initial_delay=0.001, max_delay=0.01))
    sessions: list[agentfs.Upload] = []
    with pytest.raises(agentfs.ServerError):
        await flaky.upload_file(local, "async/big.bin", threshold=0, parallel=3, on_session=sessions.append)
    await flaky.aclose()
    held = [s for s in part_puts(bundle) if s.path.endswith("/parts/1")][0]
    assert held.held == "released", "no other part was sent while part 1 was held"
    before = len(part_puts(bundle))

    prog = ProgressLog()
    async with bundle.async_client(run_id="run-async") as c:
        f = await c.upload_file(local, "async/big.bin", threshold=0, parallel=3, progress=prog,
                                on_session=sessions.append)
        assert sessions[1].id == sessions[0].id and len(sessions[1].parts) == 2
        assert part_numbers(part_puts(bundle)[before:]) == [3]
        prog.check(size)
        assert (f.sha256, f.size_bytes, f.run_id) == (digest, size, "run-async")
        async with await c.file_content(f.id) as content:
            assert await content.aread() == data

        u = await c.create_upload("async/routes.bin", 10)
        assert (await c.upload_part(u.id, 1, b"0123456789")).sha256 == sha(b"0123456789")
        assert (await c.get_upload(u.id)).parts[0].part_number == 1
        assert (await c.complete_upload(u.id)).sha256 == sha(b"0123456789")
        v = await c.create_upload("async/aborted.bin", 10)
        assert (await c.abort_upload(v.id)).status == "aborted"


async def test_async_batch(bundle: Bundle) -> None:
    async with bundle.async_client(sleep=asyncio.sleep) as c:  # wait_batch polls at its own pace
        b = await c.create_batch([agentfs.BatchOp.put("ab/1.txt", "1"), agentfs.BatchOp.put("ab/2.txt", b"\xff")])
        done = await c.wait_batch(b.id, timeout=60)
        assert done.status == "succeeded" and [it.file.sha256 for it in done.items if it.file] == [
            sha(b"1"), sha(b"\xff")]
        assert (await c.get_batch(b.id)).id == b.id
        w = await c.create_batch([agentfs.BatchOp.put("ab/1.txt", "again")], wait=10)
        assert w.status == "failed" and isinstance(w.items[0].error, agentfs.PathExistsError)
