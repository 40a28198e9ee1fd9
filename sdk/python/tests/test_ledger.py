"""The run ledger: the event feed (one page, and followed across cut polls), run summaries, archives, reverts."""

from __future__ import annotations

import asyncio
import io
import tarfile
import threading
import time
import zipfile
from pathlib import Path
from typing import Any, Iterator
from urllib.parse import parse_qs

import pytest

import agentfs
from conftest import Bundle, expect_problem, local_file, wait_until
from faultproxy import HOP_BY_HOP, FaultProxy, Handler, Seen, answer_problem, drop_after_commit
from test_async import async_wait_until


@pytest.fixture
def writers(bundle: Bundle) -> Iterator[Any]:
    """Clients of the server itself (no proxy), one per run id asked for, closed at the end."""
    made: list[agentfs.Client] = []

    def writer(run_id: str) -> agentfs.Client:
        c = agentfs.Client(bundle.server.url, bundle.token, run_id=run_id, agent_id="py-writer",
                           retry=agentfs.RetryPolicy(max_attempts=1))
        made.append(c)
        return c

    yield writer
    for c in made:
        c.close()


def await_events(c: agentfs.Client, n: int, **filters: Any) -> list[agentfs.Event]:
    """Follow pages until n events that match are visible (the feed hands an event out once every older
    transaction has ended, which may be a moment after the write returned)."""
    got: list[agentfs.Event] = []
    after = None
    for _ in range(20):
        page = c.events(after=after, wait=5, **filters)
        got += page.data
        after = page.next_cursor
        if len(got) >= n:
            return got
    raise AssertionError(f"only {len(got)} of {n} events matching {filters}")


def polls(b: Bundle) -> list[Seen]:
    return b.proxy.requests("GET", "/v1/events")


def after_of(s: Seen) -> str:
    return parse_qs(s.query).get("after", [""])[0]


def test_events_page(bundle: Bundle, writers: Any) -> None:
    w = writers("ev-run")
    a = w.put_file("ev/a.txt", b"one", idempotency_key="ev-a-1")
    w.put_file("ev/a.txt", b"two!", if_exists="replace")
    c = w.put_file("ev/sub/c.txt", b"c")
    w.move_file(c.id, "ev/sub/d.txt")
    writers("ev-other").put_file("ev/other.txt", b"o")
    c = bundle.client()
    events = await_events(c, 4, run_id="ev-run")
    assert [(e.type, e.path) for e in events] == [
        ("file.created", "ev/a.txt"), ("file.replaced", "ev/a.txt"), ("file.created", "ev/sub/c.txt"),
        ("file.moved", "ev/sub/d.txt")]
    first, moved = events[0], events[3]
    assert (first.id[:4], first.file_id, first.version, first.size_bytes, first.idempotency_key) == (
        "evt_", a.id, 1, 3, "ev-a-1")
    assert (first.run_id, first.agent_id, first.object, first.previous_path) == ("ev-run", "py-writer", "event", None)
    assert first.sha256 == a.sha256 and first.at is not None and first.request_id
    assert moved.previous_path == "ev/sub/c.txt"

    assert [e.path for e in c.events(run_id="ev-run", types="file.moved").data] == ["ev/sub/d.txt"]
    assert [e.type for e in c.events(types=["file.created", "file.moved"], prefix="ev/sub/").data] == [
        "file.created", "file.moved"]
    one = c.events(run_id="ev-run", limit=1)
    assert len(one.data) == 1 and one.has_more and one.next_cursor
    rest = c.events(run_id="ev-run", after=one.next_cursor)
    assert [e.id for e in rest.data] == [e.id for e in events[1:]] and not rest.has_more
    end = c.events(run_id="ev-run", after=rest.next_cursor)
    assert end.data == [] and end.next_cursor and not end.has_more

    with pytest.raises(agentfs.BadRequestError) as ei:
        c.events(after="bm90LWEtY3Vyc29y")
    expect_problem(ei.value, 400, "INVALID_REQUEST")
    with pytest.raises(agentfs.UnprocessableEntityError) as ei2:
        c.events(types="file.exploded")
    assert [e.field for e in expect_problem(ei2.value, 422, "VALIDATION_FAILED").errors] == ["type"]
    before = len(polls(bundle))
    with pytest.raises(ValueError):
        c.events(wait=31)
    with pytest.raises(ValueError):
        c.follow_events(wait=0)
    assert len(polls(bundle)) == before


def test_follow_events(bundle: Bundle, writers: Any) -> None:
    """The follower sees events written while it waits, in order; a poll cut after the server answered is
    asked again from the same cursor, so nothing is lost or yielded twice; close() stops it in the middle of
    a poll; a follower started from its cursor yields exactly what came after."""
    w = writers("fol-run")
    c = bundle.client()
    follower = c.follow_events(run_id="fol-run", after=agentfs.EVENTS_NOW)
    assert follower.cursor == "now"
    got: list[agentfs.Event] = []
    failed: list[BaseException] = []

    def consume() -> None:
        try:
            for e in follower:
                got.append(e)
        except BaseException as e:  # reported to the test
            failed.append(e)

    t = threading.Thread(target=consume, daemon=True)
    t.start()
    wait_until("the first poll", lambda: len(polls(bundle)) >= 1)
    bundle.proxy.inject("GET", "/v1/events", 1, drop_after_commit)  # the second poll's answer is lost
    w.put_file("fol/1.txt", b"1")
    wait_until("the first event", lambda: len(got) >= 1)
    wait_until("the second poll", lambda: len(polls(bundle)) >= 2)
    w.put_file("fol/2.txt", b"2")  # answers the second poll, whose answer is cut
    wait_until("the second event", lambda: len(got) >= 2)
    w.put_file("fol/3.txt", b"3")
    wait_until("the third event", lambda: len(got) >= 3)
    assert not failed, failed

    assert [e.path for e in got] == ["fol/1.txt", "fol/2.txt", "fol/3.txt"]
    assert len({e.id for e in got}) == 3
    seen = polls(bundle)
    assert after_of(seen[0]) == "now"
    assert seen[1].status == 0 and seen[1].server_status == 200, "the second poll was not cut after the answer"
    assert after_of(seen[2]) == after_of(seen[1]), "the poll after the cut must ask from the same cursor"
    assert all(parse_qs(s.query)["wait"] == ["30"] and parse_qs(s.query)["run_id"] == ["fol-run"] for s in seen)
    assert len(bundle.sleeper.waits) == 1, "one backoff wait, for the one cut poll"

    wait_until("the follower waiting again", lambda: len(polls(bundle)) >= 4 + 1)
    cursor = follower.cursor
    follower.close()
    t.join(25)
    assert not t.is_alive(), "close() did not end the iteration"
    waiting = polls(bundle)[-1]
    assert waiting.server_status == 0, "close() waited for the poll to be answered"
    assert not failed and follower.closed

    w.put_file("fol/4.txt", b"4")  # also answers the poll close() left behind
    with c.follow_events(run_id="fol-run", after=cursor, wait=5) as again:
        assert next(iter(again)).path == "fol/4.txt"
        assert again.cursor != cursor


def test_follow_events_failures(bundle: Bundle, writers: Any) -> None:
    """A problem retrying cannot mend ends the iteration at once; transient failures count against
    max_attempts until the feed has answered, and are retried without limit after."""
    c = bundle.client(retry=agentfs.RetryPolicy(max_attempts=2, initial_delay=0.01, max_delay=1))
    bundle.proxy.inject("GET", "/v1/events", 1, answer_problem(410, "CURSOR_EXPIRED"))
    with pytest.raises(agentfs.CursorExpiredError) as ei:
        next(iter(c.follow_events(after="old")))
    assert ei.value.code == "CURSOR_EXPIRED" and len(polls(bundle)) == 1

    bundle.proxy.inject("GET", "/v1/events", 5, answer_problem(503, "STORAGE_UNAVAILABLE"))
    with pytest.raises(agentfs.ServerError):
        next(iter(c.follow_events(after="now")))
    assert len(polls(bundle)) == 3, "two attempts before the feed ever answered"
    bundle.proxy.clear_faults()

    with pytest.raises(agentfs.UnprocessableEntityError):
        next(iter(c.follow_events(types="file.exploded")))

    w = writers("fail-run")
    w.put_file("fail/1.txt", b"1")
    f = c.follow_events(run_id="fail-run", wait=5)
    it = iter(f)
    assert next(it).path == "fail/1.txt"
    before = len(polls(bundle))
    bundle.proxy.inject("GET", "/v1/events", 4, answer_problem(503, "STORAGE_UNAVAILABLE"))
    w.put_file("fail/2.txt", b"2")
    assert next(it).path == "fail/2.txt"
    assert [s.status for s in polls(bundle)[before:]][:5] == [503, 503, 503, 503, 200]
    f.close()
    with pytest.raises(StopIteration):
        next(it)


async def test_async_follow_events(bundle: Bundle, writers: Any) -> None:
    w = writers("afol-run")
    async with bundle.async_client() as c:
        follower = c.follow_events(run_id="afol-run", after="now")
        got: list[agentfs.Event] = []

        async def consume() -> None:
            async for e in follower:
                got.append(e)

        task = asyncio.create_task(consume())
        await async_wait_until("the first poll", lambda: len(polls(bundle)) >= 1)
        bundle.proxy.inject("GET", "/v1/events", 1, drop_after_commit)
        await asyncio.to_thread(w.put_file, "afol/1.txt", b"1")
        await async_wait_until("the first event", lambda: len(got) >= 1)
        await async_wait_until("the second poll", lambda: len(polls(bundle)) >= 2)
        await asyncio.to_thread(w.put_file, "afol/2.txt", b"2")
        await async_wait_until("the second event", lambda: len(got) >= 2)
        seen = polls(bundle)
        assert [e.path for e in got] == ["afol/1.txt", "afol/2.txt"]
        assert seen[1].status == 0 and after_of(seen[2]) == after_of(seen[1])
        await async_wait_until("the follower waiting again", lambda: len(polls(bundle)) >= 4)
        await follower.aclose()
        await asyncio.wait_for(task, 25)  # ends the async for, without an error
        assert polls(bundle)[-1].server_status == 0 and follower.closed

        # Cancelling the iterating task stops it too, as a cancellation.
        other = c.follow_events(run_id="afol-run", after=follower.cursor)
        n = len(polls(bundle))

        async def first() -> agentfs.Event:
            return await other.__anext__()

        waiting = asyncio.create_task(first())
        await async_wait_until("its poll", lambda: len(polls(bundle)) > n)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(waiting, 25)

        page = await c.events(run_id="afol-run")
        assert [e.path for e in page.data] == ["afol/1.txt", "afol/2.txt"]
        # The polls left behind are still held by the server: an event answers them, so that none is
        # left open to slow the server's shutdown.
        await asyncio.to_thread(w.put_file, "afol/3.txt", b"3")


def cut_mid_body(p: FaultProxy, h: Handler, rec: Seen) -> None:
    """Forward the request, relay the status, the headers and half the body, then drop the connection."""
    res = p.forward(h, rec)
    h.send_response(res.status_code)
    for k, v in res.headers.items():
        if k.lower() not in HOP_BY_HOP:
            h.send_header(k, v)
    h.send_header("Content-Length", str(len(res.content)))
    h.end_headers()
    h.wfile.write(res.content[: len(res.content) // 2])
    h.wfile.flush()
    h.hang_up()


def live_files_of(b: Bundle, run_id: str) -> dict[str, bytes]:
    """What a run left live, path to bytes: the files it created or last wrote, read through the API."""
    out = {}
    for f in b.direct.list_files():
        if run_id in (f.run_id, f.last_run_id):
            with b.direct.file_content(f.id) as content:
                out[f.path] = content.read()
    return out


def zip_entries(data: bytes) -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        return {name: z.read(name) for name in z.namelist()}


def tar_entries(path: Path) -> dict[str, bytes]:
    with tarfile.open(path) as t:
        return {m.name: t.extractfile(m).read() for m in t.getmembers()}  # type: ignore[union-attr]


def test_run_and_archive(bundle: Bundle, writers: Any, tmp_path: Path) -> None:
    run = "arch/run-1"
    w, other = writers(run), writers("arch-other")
    big, data, _ = local_file(tmp_path, 3 << 20, 21)
    w.put_file("arch/a.txt", b"first")
    w.put_file("arch/a.txt", b"second", if_exists="replace")
    w.put_file("arch/deep/big.bin", big)
    w.put_file("arch/empty", b"")
    gone = w.put_file("arch/gone.txt", b"gone")
    w.delete_file(gone.id)
    other.put_file("arch/other.txt", b"not the run's")
    other.put_file("arch/shared.txt", b"by the other run")
    w.put_file("arch/shared.txt", b"then by the run", if_exists="replace")
    want = live_files_of(bundle, run)
    assert sorted(want) == ["arch/a.txt", "arch/deep/big.bin", "arch/empty", "arch/shared.txt"]
    assert want["arch/deep/big.bin"] == data

    c = bundle.client()
    r = c.run(run)
    assert (r.run_id, r.object, r.agent_ids, r.live_files) == (run, "run", ["py-writer"], 4)
    assert r.counts == agentfs.RunCounts(created=4, replaced=2, deleted=1)
    assert r.bytes_written == len(b"first") + len(b"second") + len(data) + len(b"gone") + len(b"then by the run")
    assert r.first_at is not None and r.last_at is not None and r.first_at <= r.last_at
    assert [s.path for s in bundle.proxy.where(lambda s: s.path.startswith("/v1/runs/"))] == ["/v1/runs/arch%2Frun-1"]

    buf = io.BytesIO()
    reports: list[tuple[int, Any]] = []
    n = c.run_archive(run, buf, progress=lambda got, total: reports.append((got, total)))
    assert n == len(buf.getvalue()) and reports and reports[-1] == (n, None)
    assert [got for got, _ in reports] == sorted(got for got, _ in reports)
    assert zip_entries(buf.getvalue()) == want

    dest = tmp_path / "out" / "run.tar"
    dest.parent.mkdir()
    assert c.run_archive(run, dest) == dest.stat().st_size
    assert tar_entries(dest) == want
    assert parse_qs(bundle.proxy.where(lambda s: s.path.endswith("/archive"))[-1].query)["format"] == ["tar"]

    bundle.proxy.inject("GET", "/v1/runs/*", 1, answer_problem(503, "STORAGE_UNAVAILABLE"))
    buf = io.BytesIO()
    c.run_archive(run, buf, format="zip")
    assert zip_entries(buf.getvalue()) == want

    bundle.proxy.inject("GET", "/v1/runs/*", 1, cut_mid_body)
    cut = tmp_path / "out" / "cut.zip"
    with pytest.raises(agentfs.APIConnectionError, match="the run archive stopped after"):
        c.run_archive(run, cut)
    assert sorted(p.name for p in cut.parent.iterdir()) == ["run.tar"], "a cut archive left something behind"

    with pytest.raises(agentfs.NotFoundError):
        c.run("arch-nobody")
    with pytest.raises(agentfs.NotFoundError):
        c.run_archive("arch-nobody", io.BytesIO())
    before = len(bundle.proxy.seen())
    with pytest.raises(ValueError):
        c.run_archive(run, io.BytesIO(), format="rar")
    with pytest.raises(ValueError):
        c.run("has space")
    assert len(bundle.proxy.seen()) == before


def file_at(b: Bundle, path: str) -> bytes:
    """The live content at path, b"" when none holds it."""
    files = b.direct.list_files(path=path).data
    if not files:
        return b""
    with b.direct.file_content(files[0].id) as content:
        return content.read()


def test_list_runs_and_plan_revert_run(bundle: Bundle, writers: Any) -> None:
    for run in ["lr-1", "lr-2", "lr-3"]:
        writers(run).put_file(f"lr/{run}.txt", b"made")
    c = bundle.client()
    page = c.list_runs(limit=2)
    assert [r.run_id for r in page.data] == ["lr-3", "lr-2"] and page.has_more
    assert [r.run_id for r in c.list_runs(limit=2)] == ["lr-3", "lr-2", "lr-1"], "iterating walks every page"
    plan = c.plan_revert_run("lr-2")
    assert (plan.object, plan.run_id) == ("run_revert_plan", "lr-2")
    assert [(s.action, s.path, s.version) for s in plan.items] == [("delete", "lr/lr-2.txt", None)]
    assert file_at(bundle, "lr/lr-2.txt") == b"made", "a plan changes nothing"


def test_revert_run(bundle: Bundle, writers: Any) -> None:
    setup, run = writers("rev-setup"), writers("rev-run")
    setup.put_file("rev/base.txt", b"original")
    kept = setup.put_file("rev/kept.txt", b"keep me")
    run.put_file("rev/new.txt", b"made by the run")
    run.put_file("rev/base.txt", b"overwritten", if_exists="replace")
    run.delete_file(kept.id)
    c = bundle.client(run_id="rev-undo", sleep=time.sleep)  # wait_batch polls at its own pace

    b = c.revert_run("rev-run", wait=True, timeout=60)
    assert b.status == "succeeded" and b.counts.total == 3 and [it.op for it in b.items] == ["undo"] * 3
    assert [it.path for it in b.items] == ["rev/kept.txt", "rev/base.txt", "rev/new.txt"], "newest change first"
    assert (file_at(bundle, "rev/base.txt"), file_at(bundle, "rev/kept.txt"), file_at(bundle, "rev/new.txt")) == (
        b"original", b"keep me", b"")
    undo = c.run("rev-undo")
    assert (undo.counts.deleted, undo.counts.restored, undo.counts.reverted) == (1, 1, 1)

    # A lost answer to the keyed revert replays the same batch; nothing runs twice.
    writers("rev-lost").put_file("rev/lost.txt", b"made")
    batches_before = len(list(c.list_batches()))
    bundle.proxy.inject("POST", "/v1/runs/*", 1, drop_after_commit)
    lost = c.revert_run("rev-lost")
    posts = bundle.proxy.requests("POST", "/v1/runs/rev-lost/revert")
    assert len(posts) == 2 and posts[0].status == 0 and posts[0].server_status == 202
    assert posts[0].key and posts[1].key == posts[0].key and posts[1].replayed and posts[1].status == 200
    assert len(list(c.list_batches())) == batches_before + 1
    assert c.wait_batch(lost.id, timeout=60).status == "succeeded" and file_at(bundle, "rev/lost.txt") == b""
    again = c.revert_run("rev-lost", idempotency_key=posts[0].key)
    assert (again.id, again.status) == (lost.id, "succeeded")
    assert len(list(c.list_batches())) == batches_before + 1

    # A file another run changed since fails its item, unless forced.
    setup.put_file("rev/x.txt", b"v1")
    writers("rev-a").put_file("rev/x.txt", b"by a", if_exists="replace")
    writers("rev-b").put_file("rev/x.txt", b"by b", if_exists="replace")
    refused = c.revert_run("rev-a", wait=True, timeout=60, idempotency_key="py-rev-a-1")
    err = refused.items[0].error
    assert refused.status == "failed" and isinstance(err, agentfs.ChangedSinceRunError)
    assert (err.status, err.code) == (409, "CHANGED_SINCE_RUN") and file_at(bundle, "rev/x.txt") == b"by b"
    with pytest.raises(agentfs.IdempotencyConflictError):
        c.revert_run("rev-a", force=True, idempotency_key="py-rev-a-1")
    forced = c.revert_run("rev-a", force=True, wait=True, timeout=60)
    assert forced.status == "succeeded" and file_at(bundle, "rev/x.txt") == b"v1"

    # Always keyed, also without generated keys; refusals.
    writers("rev-plain").put_file("rev/plain.txt", b"p")
    bundle.client(idempotency_keys=False).revert_run("rev-plain")
    assert len(bundle.proxy.requests("POST", "/v1/runs/rev-plain/revert")[0].key) > 0
    with pytest.raises(agentfs.NotFoundError):
        c.revert_run("rev-nobody")
    with pytest.raises(ValueError):
        c.revert_run("has space")


async def test_async_run_archive_and_revert(bundle: Bundle, writers: Any, tmp_path: Path) -> None:
    w = writers("arun")
    w.put_file("arun/a.txt", b"a")
    w.put_file("arun/b.txt", b"b")
    async with bundle.async_client(sleep=asyncio.sleep, run_id="arun-undo") as c:
        r = await c.run("arun")
        assert r.counts.created == 2 and r.live_files == 2
        dest = tmp_path / "arun.zip"
        reports: list[int] = []
        n = await c.run_archive("arun", dest, progress=lambda got, _: reports.append(got))
        assert n == dest.stat().st_size and reports[-1] == n
        assert zip_entries(dest.read_bytes()) == {"arun/a.txt": b"a", "arun/b.txt": b"b"}
        b = await c.revert_run("arun", wait=True, timeout=60)
        assert b.status == "succeeded" and b.counts.succeeded == 2
        assert (await c.run("arun")).live_files == 0
        page = await c.events(run_id="arun-undo", wait=5)
        assert page.data and {e.type for e in page.data} == {"file.deleted"}
        undone = await asyncio.to_thread(await_events, bundle.direct, 2, run_id="arun-undo")
        assert sorted(e.path for e in undone) == ["arun/a.txt", "arun/b.txt"]


def test_run_recovery(bundle: Bundle, writers: Any) -> None:
    run = "py-recover"
    w = writers(run)
    f = w.put_file("recover/a.txt", b"one", idempotency_key="py-rec-1")
    w.put_file("recover/b.txt", b"two", idempotency_key="py-rec-2")
    c = bundle.client()
    r = c.run_recovery(run)
    assert (r.object, r.run_id, r.confirmed.events, r.confirmed.counts.created) == ("run_recovery", run, 2, 2)
    assert r.confirmed.last_event_cursor is not None and r.as_of
    assert [o.idempotency_key for o in r.operations] == ["py-rec-2", "py-rec-1"]
    done = r.operations[1]
    assert (done.status, done.response_status, done.resource and done.resource.id) == ("completed", 201, f.id)
    assert done.next.method == "GET" and done.next.path == "/v1/operations/py-rec-1" and done.next.text
    assert r.next_actions == [] and r.in_flight.uploads == [] and r.in_flight.batches == []
    page = c.run_recovery(run, limit=1)
    assert page.has_more and page.next_cursor is not None and [o.idempotency_key for o in page.operations] == ["py-rec-2"]
    rest = c.run_recovery(run, limit=1, cursor=page.next_cursor)
    assert [o.idempotency_key for o in rest.operations] == ["py-rec-1"] and rest.next_cursor is None
    with pytest.raises(agentfs.NotFoundError):
        c.run_recovery("py-no-such-run")
