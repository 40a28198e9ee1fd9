"""File history and lifecycle: versions, revert, move, expiry, share links, and listing sessions and batches."""

from __future__ import annotations

import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import httpx
import pytest

import agentfs
from conftest import Bundle, expect_problem, local_file, sha
from faultproxy import drop_after_commit
from test_faults import SlowUpload


def test_versions_revert_move(bundle: Bundle) -> None:
    c = bundle.client(run_id="hist-run")
    f = c.put_file("hist/plan.md", b"# v1", content_type="text/markdown")
    c.put_file("hist/plan.md", b"# v2, longer", if_exists="replace", content_type="text/markdown")

    page = c.list_versions(f.id, limit=1)
    assert len(page.data) == 1 and page.has_more
    versions = list(page)
    assert [(v.version, v.current, v.sha256) for v in versions] == [(2, True, sha(b"# v2, longer")),
                                                                    (1, False, sha(b"# v1"))]
    one = c.get_version(f.id, 1)
    assert (one.file_id, one.size_bytes, one.run_id, one.object, one.etag) == (f.id, 4, "hist-run", "file_version",
                                                                               f.etag)
    with c.version_content(f.id, 1) as content:
        assert content.read() == b"# v1" and content.sha256 == sha(b"# v1")
    with c.version_content(f.id, 2, range="bytes=2-3") as part:
        assert (part.status, part.read()) == (206, b"v2")
    with pytest.raises(agentfs.NotFoundError):
        c.get_version(f.id, 9)
    with pytest.raises(ValueError):
        c.get_version(f.id, 0)

    with pytest.raises(agentfs.PreconditionFailedError):
        c.revert_file(f.id, 1, if_match=f.etag)  # f.etag is version 1's, not the current one's
    r = c.revert_file(f.id, 1)
    assert (r.id, r.version, r.sha256) == (f.id, 3, sha(b"# v1"))

    other = c.put_file("hist/taken.md", b"taken")
    with pytest.raises(agentfs.PathExistsError) as ei:
        c.move_file(f.id, "hist/taken.md")
    assert expect_problem(ei.value, 409, "PATH_EXISTS").existing_file_id == other.id
    bundle.proxy.inject("POST", f"/v1/files/{f.id}/move", 1, drop_after_commit)
    m = c.move_file(f.id, "hist/final.md", if_match=r.etag)
    moves = bundle.proxy.requests("POST", f"/v1/files/{f.id}/move")
    assert [s.status for s in moves] == [409, 0, 200] and moves[2].replayed and moves[2].key == moves[1].key
    assert (m.id, m.path, m.version) == (f.id, "hist/final.md", 3)
    replaced = c.move_file(f.id, "hist/taken.md", if_exists="replace")
    assert replaced.path == "hist/taken.md" and c.get_file(other.id).deleted_at is not None


def test_expiry(bundle: Bundle, tmp_path: Path) -> None:
    c = bundle.client(sleep=time.sleep)
    f = c.put_file("exp/scratch.txt", b"tmp", expires_in=3600)
    assert f.expires_at is not None and f.created_at is not None
    assert abs((f.expires_at - f.created_at).total_seconds() - 3600) < 60
    assert "expires_in=3600" in bundle.proxy.requests("POST", "/v1/files")[-1].query
    kept = c.put_file("exp/scratch.txt", b"tmp 2", if_exists="replace")
    assert kept.expires_at == f.expires_at, "a replace without expires_in keeps the expiry"

    at = datetime.now(timezone.utc).replace(microsecond=0) + timedelta(days=30)
    assert c.set_expiry(f.id, at).expires_at == at
    assert c.set_expiry(f.id, None).expires_at is None
    with pytest.raises(ValueError):
        c.set_expiry(f.id, datetime(2030, 1, 1))  # naive: which zone?
    with pytest.raises(agentfs.UnprocessableEntityError):
        c.put_file("exp/too-soon.txt", b"x", expires_in=10)
    with pytest.raises(ValueError):
        c.put_file("exp/never.txt", b"x", expires_in=-1)

    local, _, _ = local_file(tmp_path, 6 << 20, 31)
    up = c.upload_file(local, "exp/session.bin", threshold=0, expires_in=timedelta(hours=2))
    assert up.expires_at is not None and abs((up.expires_at - up.created_at).total_seconds() - 7200) < 60
    b = c.create_batch([agentfs.BatchOp.put("exp/batch.txt", "b", expires_in=86400)], wait=10)
    item = b.items[0].file
    assert item is not None and item.expires_at is not None


def test_links(bundle: Bundle) -> None:
    c = bundle.client()
    f = c.put_file("links/a.txt", b"version one")
    c.put_file("links/a.txt", b"version two", if_exists="replace")
    current = c.create_link(f.id, expires_in=timedelta(hours=24))
    pinned = c.create_link(f.id, version=1, idempotency_key="py-link-1")
    assert current.url and current.id.startswith("lnk_") and current.version is None and current.file_id == f.id
    assert current.expires_at is not None and current.created_at is not None
    assert httpx.get(current.url).content == b"version two"
    assert pinned.version == 1 and httpx.get(pinned.url).content == b"version one"
    assert c.create_link(f.id, version=1, idempotency_key="py-link-1").url == pinned.url, "a replay shows the URL again"

    listed = c.links(f.id)
    assert sorted(l.id for l in listed) == sorted([current.id, pinned.id]) and all(l.url is None for l in listed)
    revoked = c.revoke_link(current.id)
    assert revoked.revoked_at is not None and c.revoke_link(current.id).revoked_at == revoked.revoked_at
    assert httpx.get(current.url).status_code == 404

    plain = bundle.client(idempotency_keys=False)
    bundle.proxy.inject("DELETE", f"/v1/links/{pinned.id}", 1, drop_after_commit)
    assert plain.revoke_link(pinned.id).revoked_at is not None, "revoking is repeated without a key"
    with pytest.raises(agentfs.UnprocessableEntityError):
        c.create_link(f.id, expires_in=timedelta(days=8))


def test_list_uploads_and_batches_and_cancel(bundle: Bundle) -> None:
    c = bundle.client(sleep=time.sleep)
    pending = c.create_upload("lists/big.bin", 100)
    gone = c.create_upload("lists/gone.bin", 100)
    c.abort_upload(gone.id)
    assert [u.id for u in c.list_uploads()] == [gone.id, pending.id]
    assert [u.id for u in c.list_uploads(status="pending")] == [pending.id]
    first = c.list_uploads(limit=1)
    assert first.has_more and [p.data[0].id for p in first.iter_pages()] == [gone.id, pending.id]
    assert [u.id for u in c.list_uploads(path="lists/gone.bin")] == [gone.id]

    # A batch whose first item waits for a key another request holds: the item after it cannot have run
    # when the cancel comes.
    slow = SlowUpload(bundle, "lists/held.txt", "py-held", b"held ")
    b = c.create_batch([agentfs.BatchOp.put("lists/held.txt", "held body", idempotency_key="py-held"),
                        agentfs.BatchOp.put("lists/never.txt", "n")])
    canceled = c.cancel_batch(b.id)
    assert canceled.id == b.id and canceled.items[1].status == "canceled"
    assert slow.finish(b"body") == 201
    ended = c.wait_batch(b.id, timeout=60)
    # The first item was canceled too, or ran (if it had started): either way nothing is pending.
    n = ended.counts
    assert ended.status == "canceled" and ended.terminal and n.canceled >= 1 and n.pending == 0
    assert n.canceled + n.succeeded + n.failed == 2 and ended.items[1].status == "canceled"
    assert c.cancel_batch(b.id).status == "canceled", "cancelling an ended batch returns it unchanged"
    listed = list(c.list_batches())
    assert [x.id for x in listed] == [b.id] and listed[0].items == [] and listed[0].counts.total == 2
    assert list(c.list_batches(status="running")) == []
    with pytest.raises(agentfs.NotFoundError):
        c.cancel_batch("batch_nope")


async def test_async_history(bundle: Bundle) -> None:
    async with bundle.async_client() as c:
        f = await c.put_file("ahist/a.txt", b"one", expires_in=3600)
        await c.put_file("ahist/a.txt", b"two", if_exists="replace")
        assert [v.version async for v in await c.list_versions(f.id)] == [2, 1]
        assert (await c.get_version(f.id, 1)).sha256 == sha(b"one")
        async with await c.version_content(f.id, 1) as content:
            assert await content.aread() == b"one"
        assert (await c.revert_file(f.id, 1)).version == 3
        assert (await c.move_file(f.id, "ahist/b.txt")).path == "ahist/b.txt"
        assert (await c.set_expiry(f.id, None)).expires_at is None
        link = await c.create_link(f.id)
        assert link.url and [x.id for x in await c.links(f.id)] == [link.id]
        assert (await c.revoke_link(link.id)).revoked_at is not None
        u = await c.create_upload("ahist/up.bin", 10)
        assert [x.id async for x in await c.list_uploads(status="pending")] == [u.id]
        b = await c.create_batch([agentfs.BatchOp.put("ahist/batch.txt", "x")], wait=10)
        assert [x.id async for x in await c.list_batches()] == [b.id]
        assert (await c.cancel_batch(b.id)).status == b.status


def test_mount_metadata_folders_overwrite(bundle: Bundle) -> None:
    c = bundle.client()
    when = datetime(2020, 1, 2, 3, 4, 5, tzinfo=timezone.utc)
    f = c.put_file("meta/run.sh", b"#!/bin/sh", mode=0o755, mtime=when)
    assert (f.mode, f.mtime, f.kind) == (0o755, when, "file")
    link = c.put_file("meta/link", b"run.sh", kind="symlink")
    c.put_file("meta/empty", b"", kind="directory")
    c.put_file("meta/sub/deep.txt", b"deep")
    assert link.kind == "symlink" and link.mode == 0o644

    page = c.list_folder("meta/", limit=2)
    names = [x.path for x in page.files] + page.prefixes
    while page.has_more:
        page = c.list_folder("meta/", limit=2, cursor=page.next_cursor)
        names += [x.path for x in page.files] + page.prefixes
    assert sorted(names) == ["meta/empty", "meta/link", "meta/run.sh", "meta/sub/"]

    later = datetime(2021, 6, 7, tzinfo=timezone.utc)
    p = c.set_metadata(f.id, mode=0o700, mtime=later)
    assert (p.mode, p.mtime, p.version) == (0o700, later, 1)
    with pytest.raises(ValueError):
        c.set_metadata(f.id)

    tmp = c.put_file("meta/.run.sh.swp", b"#!/bin/sh\necho saved")
    saved = c.move_file(tmp.id, "meta/run.sh", if_exists="overwrite")
    assert (saved.id, saved.version, saved.sha256) == (f.id, 2, sha(b"#!/bin/sh\necho saved"))
    assert c.get_file(tmp.id).deleted_at is not None
