"""Every files route, the protocol and operations, through the sync client against the real server."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

import agentfs
from conftest import Bundle, expect_problem, sha


def test_files_routes(bundle: Bundle, tmp_path: Path) -> None:
    c = bundle.client(agent_id="agent-a", run_id="run-1")

    f = c.put_file("reports/summary.txt", b"first draft", content_type="text/plain")
    assert isinstance(f, agentfs.File)
    assert (f.path, f.size_bytes, f.content_type, f.sha256, f.version) == (
        "reports/summary.txt", 11, "text/plain", sha(b"first draft"), 1)
    assert (f.agent_id, f.run_id, f.deleted_at) == ("agent-a", "run-1", None)
    assert f.id.startswith("file_") and f.etag == f'"{f.sha256}"' and f.created_at is not None
    got = c.get_file(f.id)
    assert (got.etag, got.url, got.created_at) == (f.etag, f.url, f.created_at)

    # Content: whole, a range, an unsatisfiable range.
    with c.file_content(f.id) as content:
        data = content.read()
    assert data == b"first draft"
    assert (content.status, content.sha256, content.filename, content.content_type, content.length,
            content.etag) == (200, f.sha256, "summary.txt", "text/plain", 11, f.etag)
    with c.file_content(f.id, range="bytes=6-") as part:
        assert b"".join(part.iter_bytes()) == b"draft"
    assert (part.status, part.content_range, part.sha256) == (206, "bytes 6-10/11", f.sha256)
    with pytest.raises(agentfs.Problem) as ei:
        c.file_content(f.id, range="bytes=50-")
    expect_problem(ei.value, 416, "RANGE_NOT_SATISFIABLE")

    # Download to a path and to a file object, verified against Repr-Digest.
    dest = tmp_path / "out" / "summary.txt"
    dest.parent.mkdir()
    assert c.download_file(f.id, dest) == 11 and dest.read_bytes() == b"first draft"
    buf = io.BytesIO()
    assert c.download_file(f.id, buf) == 11 and buf.getvalue() == b"first draft"

    # Replace keeps id and url; If-Match with an old etag is refused.
    r = c.put_file("reports/summary.txt", b"final version", if_exists="replace", content_type="text/plain")
    assert (r.id, r.url, r.version, r.sha256) == (f.id, f.url, 2, sha(b"final version"))
    with pytest.raises(agentfs.PreconditionFailedError) as ei:
        c.put_file("reports/summary.txt", b"x", if_exists="replace", if_match=f.etag)
    expect_problem(ei.value, 412, "PRECONDITION_FAILED")
    with pytest.raises(agentfs.PreconditionFailedError):
        c.put_file("reports/summary.txt", b"x", if_none_match="*")

    # PATH_EXISTS carries the file that holds the path.
    with pytest.raises(agentfs.PathExistsError) as ei:
        c.put_file("reports/summary.txt", b"again")
    p = expect_problem(ei.value, 409, "PATH_EXISTS")
    assert p.existing_file_id == f.id and not p.retryable and isinstance(p, agentfs.ConflictError)
    assert "PATH_EXISTS" in str(p) and f.id in str(p)

    # Delete and restore, both safe to repeat; the content of a deleted file is 404.
    d = c.delete_file(f.id)
    assert d.deleted_at is not None and d.purge_after is not None
    with pytest.raises(agentfs.NotFoundError) as ei:
        c.file_content(f.id)
    expect_problem(ei.value, 404, "NOT_FOUND")
    assert c.delete_file(f.id).deleted_at is not None
    restored = c.restore_file(f.id)
    assert restored.deleted_at is None and restored.id == f.id
    assert c.restore_file(f.id).deleted_at is None
    with pytest.raises(agentfs.NotFoundError):
        c.delete_file("file_doesnotexist")
    with pytest.raises(agentfs.NotFoundError):
        c.get_file("file_doesnotexist")


def test_put_bodies(bundle: Bundle, tmp_path: Path) -> None:
    """bytes, a path, a seekable file from its offset, an iterator and a factory all stream as the file."""
    c = bundle.client()
    local = tmp_path / "local.txt"
    local.write_bytes(b"from a path on disk")
    assert c.put_file("bodies/path.txt", local).sha256 == sha(b"from a path on disk")
    with open(local, "rb") as fh:
        fh.seek(5)
        assert c.put_file("bodies/file.txt", fh).sha256 == sha(b"a path on disk")
    assert c.put_file("bodies/iter.txt", iter([b"chunk one, ", b"chunk two"])).sha256 == sha(b"chunk one, chunk two")
    sized = c.put_file("bodies/sized.txt", (b for b in [b"ab", b"cd"]), size=4)
    assert sized.size_bytes == 4
    assert c.put_file("bodies/factory.txt", lambda: [b"made ", b"fresh"]).sha256 == sha(b"made fresh")
    assert c.put_file("bodies/empty.txt", b"").size_bytes == 0
    with pytest.raises(TypeError, match="pathlib.Path"):
        c.put_file("bodies/str.txt", "not bytes")  # type: ignore[arg-type]
    with pytest.raises(agentfs.AgentFSError, match="not 5"):
        c.put_file("bodies/short.txt", iter([b"abc"]), size=5)
    assert bundle.files_at("bodies/short.txt") == []
    # A declared SHA-256 is sent as Content-Digest and checked.
    with pytest.raises(agentfs.UnprocessableEntityError) as ei:
        c.put_file("bodies/digest.txt", b"content", sha256=sha(b"other"))
    expect_problem(ei.value, 422, "CHECKSUM_MISMATCH")
    assert c.put_file("bodies/digest.txt", b"content", sha256=sha(b"content")).sha256 == sha(b"content")


def test_list_and_iterate(bundle: Bundle) -> None:
    c = bundle.client(agent_id="agent-a", run_id="run-1")
    other = c.with_options(run_id="run-2")
    want = []
    for i in range(5):
        want.insert(0, c.put_file(f"listed/{i}", b"x").id)  # newest first
    other.put_file("listed/other-run", b"y")
    c.put_file("unlisted/per-call", b"z", run_id="run-3", agent_id=None)

    page = c.list_files(run_id="run-1", limit=2)
    assert isinstance(page, agentfs.Page) and len(page.data) == 2 and page.has_more and page.next_cursor
    assert [f.id for f in page] == want  # iterating follows next_cursor
    assert [len(p.data) for p in page.iter_pages()] == [2, 2, 1]
    prefixed = c.list_files(prefix="listed/", agent_id="agent-a")
    assert len(prefixed.data) == 6 and not prefixed.has_more and prefixed.next_cursor is None
    per_call = c.list_files(run_id="run-3").data
    assert [(f.path, f.agent_id, f.run_id) for f in per_call] == [("unlisted/per-call", None, "run-3")]
    exact = c.list_files(path="listed/0").data
    assert [f.id for f in exact] == [want[-1]]

    with pytest.raises(agentfs.UnprocessableEntityError) as ei:
        c.list_files(limit=5000)
    p = expect_problem(ei.value, 422, "VALIDATION_FAILED")
    assert [e.field for e in p.errors] == ["limit"] and p.errors[0].message

    # fields: only the members asked for (and id); the rest read as defaults.
    slim = c.list_files(run_id="run-1", limit=2, fields=["path", "size_bytes"])
    assert [f.id for f in slim] == want
    assert {(f.path, f.size_bytes, f.sha256, f.created_at) for f in slim.data} <= {
        (f"listed/{i}", 1, "", None) for i in range(5)}
    folder = c.list_folder("listed/", fields=["path"])
    assert sorted(f.path for f in folder.files) == sorted([f"listed/{i}" for i in range(5)] + ["listed/other-run"])
    assert all(f.size_bytes == 0 and f.id.startswith("file_") for f in folder.files)
    with pytest.raises(agentfs.UnprocessableEntityError) as ei:
        c.list_files(fields=["path", "nope"])
    assert [e.field for e in expect_problem(ei.value, 422, "VALIDATION_FAILED").errors] == ["fields"]
    with pytest.raises(TypeError):
        c.list_files(fields="path")


def test_operations_and_protocol(bundle: Bundle) -> None:
    c = bundle.client()
    g = c.put_file("ops/a.txt", b"keyed", idempotency_key="ops-a-1")
    op = c.get_operation("ops-a-1")
    assert (op.status, op.method, op.route, op.response_status) == ("completed", "POST", "/v1/files", 201)
    assert op.resource is not None and op.resource.id == g.id
    out = op.outcome()
    assert isinstance(out, agentfs.File) and out.id == g.id and out.sha256 == sha(b"keyed")

    # The same key and bytes again: the recorded file, nothing new.
    again = c.put_file("ops/a.txt", b"keyed", idempotency_key="ops-a-1")
    assert again.id == g.id and again.version == 1
    bundle.expect_one_file("ops/a.txt", g.id)
    with pytest.raises(agentfs.IdempotencyConflictError) as ei:
        c.put_file("ops/a.txt", b"other bytes", idempotency_key="ops-a-1")
    expect_problem(ei.value, 409, "IDEMPOTENCY_CONFLICT")

    with pytest.raises(agentfs.PathExistsError):
        c.put_file("ops/a.txt", b"z", idempotency_key="ops-taken")
    recorded = c.get_operation("ops-taken")
    with pytest.raises(agentfs.PathExistsError) as ei:
        recorded.outcome()
    assert ei.value.existing_file_id == g.id and ei.value.status == 409
    with pytest.raises(agentfs.NotFoundError):
        c.get_operation("never-used")

    proto = c.protocol()
    assert proto.api_version == "v1" and proto.idempotency["header"] == "Idempotency-Key"
    assert proto.retry["max_attempts"] == 8 and proto.limits["list_limit_max"] == 1000
    assert "api_version" in proto.raw


def test_unauthenticated_and_bad_input(bundle: Bundle) -> None:
    anon = agentfs.Client(bundle.proxy.url, "not-a-token", retry=agentfs.RetryPolicy(max_attempts=1))
    with pytest.raises(agentfs.AuthenticationError) as ei:
        anon.get_file("file_x")
    expect_problem(ei.value, 401, "UNAUTHENTICATED")

    c = bundle.client()
    with pytest.raises(agentfs.UnprocessableEntityError) as ei:
        c.put_file("/absolute", b"x")
    expect_problem(ei.value, 422, "INVALID_PATH")
    # Checked before anything is sent.
    before = len(bundle.proxy.seen())
    with pytest.raises(ValueError):
        c.put_file("ok.txt", b"x", idempotency_key="has space")
    with pytest.raises(ValueError):
        c.put_file("ok.txt", b"x", run_id="has space")
    with pytest.raises(ValueError):
        c.put_file("ok.txt", b"x", sha256="abc")
    assert len(bundle.proxy.seen()) == before


def test_protocol_names_the_mcp_door(bundle: Bundle) -> None:
    """The protocol says where the server serves its MCP tools."""
    mcp = bundle.client().protocol().mcp
    assert mcp is not None and mcp["endpoint"] == "/mcp" and mcp["transport"] == "streamable-http"
