"""Upload sessions: parallel parts, resume, progress, and the session routes one by one."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any, Optional

import pytest

import agentfs
from conftest import MAX_UPLOAD_BYTES, PART_SIZE, Bundle, expect_problem, local_file, sha
from faultproxy import FaultProxy, answer_problem, drop_after_commit, hold_until


class ProgressLog:
    """Records a progress callback's calls and whether any was unsound."""

    def __init__(self) -> None:
        self.calls: list[tuple[int, int]] = []
        self.bad: Optional[str] = None
        self._running = threading.Lock()

    def __call__(self, sent: int, total: int) -> None:
        if not self._running.acquire(blocking=False):
            self.bad = "called concurrently"
            return
        try:
            self.calls.append((sent, total))
            if not 0 <= sent <= total:
                self.bad = f"sent {sent} outside [0, {total}]"
        finally:
            self._running.release()

    def check(self, want: int) -> None:
        assert self.calls and self.bad is None, (len(self.calls), self.bad)
        assert self.calls[-1] == (want, want)


def is_part(n: int):
    return lambda h: h.command == "PUT" and h.url_path.endswith(f"/parts/{n}")


def part_puts(b: Bundle) -> list[Any]:
    return b.proxy.where(lambda s: s.method == "PUT" and "/parts/" in s.path)


def part_numbers(seen: list[Any]) -> list[int]:
    return sorted(int(s.path.rsplit("/", 1)[1]) for s in seen)


def expect_content(b: Bundle, f: agentfs.File, data: bytes) -> None:
    with b.direct.file_content(f.id) as c:
        assert c.read() == data


def test_upload_file_parallel_parts(bundle: Bundle, tmp_path: Path) -> None:
    """12 MiB as three parts, sent in parallel, each with its Content-Digest and a key; progress ends at the total."""
    c = bundle.client(run_id="run-up")
    size = 12 << 20
    local, data, digest = local_file(tmp_path, size, 1)

    # Part 1 is held until another part arrives: only parallel sends get past it.
    def another_part(p: FaultProxy) -> bool:
        return any(not s.path.endswith("/parts/1") for s in p.where(lambda s: s.method == "PUT"))

    bundle.proxy.inject_where(is_part(1), 1, hold_until(another_part))
    prog = ProgressLog()
    sessions: list[agentfs.Upload] = []
    f = c.upload_file(local, "big/data.bin", content_type="application/x-test", parallel=3, threshold=0,
                      progress=prog, on_session=sessions.append)
    assert (f.path, f.size_bytes, f.sha256, f.content_type, f.version, f.run_id) == (
        "big/data.bin", size, digest, "application/x-test", 1, "run-up")
    assert len(sessions) == 1
    u = sessions[0]
    assert (u.part_count, u.part_size, u.parts, u.sha256, u.status) == (3, PART_SIZE, [], digest, "pending")
    puts = part_puts(bundle)
    first_part = [s for s in puts if s.path.endswith("/parts/1")][0]
    assert first_part.held == "released", "no other part was sent while part 1 was held"
    prog.check(size)
    assert len(puts) == 3 and part_numbers(puts) == [1, 2, 3]
    assert all(p.digest.startswith("sha-256=:") and p.key and p.status == 200 for p in puts)
    expect_content(bundle, f, data)
    after = c.get_upload(u.id)
    assert after.status == "completed" and after.file is not None and after.file.id == f.id
    assert len(after.parts) == 3

    # PATH_EXISTS, then the same call with replace resumes the session it left: nothing is sent again.
    changed, new_data, new_sum = local_file(tmp_path, 6 << 20, 2, "changed.bin")
    with pytest.raises(agentfs.PathExistsError) as ei:
        c.upload_file(changed, "big/data.bin", threshold=0)
    assert ei.value.existing_file_id == f.id
    before = len(part_puts(bundle))
    resumed: list[agentfs.Upload] = []
    r = c.upload_file(changed, "big/data.bin", if_exists="replace", threshold=0, on_session=resumed.append)
    assert (r.id, r.version, r.sha256) == (f.id, 2, new_sum)
    assert len(resumed) == 1 and len(resumed[0].parts) == 2
    assert len(part_puts(bundle)) == before
    expect_content(bundle, r, new_data)


def test_upload_file_resumes_after_interruption(bundle: Bundle, tmp_path: Path) -> None:
    """An upload whose last part keeps failing stops, leaving the session; the next call sends only that part."""
    size = 2 * PART_SIZE + 1234
    local, data, digest = local_file(tmp_path, size, 3)
    flaky = bundle.client(retry=agentfs.RetryPolicy(max_attempts=2, initial_delay=0.001, max_delay=0.01))
    bundle.proxy.inject_where(is_part(3), 2, answer_problem(500, "INTERNAL"))
    first: list[agentfs.Upload] = []
    prog1 = ProgressLog()
    with pytest.raises(agentfs.ServerError):
        flaky.upload_file(local, "resumed.bin", threshold=0, parallel=1, progress=prog1, on_session=first.append)
    assert prog1.bad is None and prog1.calls[-1][0] == 2 * PART_SIZE  # part 3 was taken back
    assert bundle.files_at("resumed.bin") == []
    held = bundle.direct.get_upload(first[0].id)
    assert held.status == "pending" and [p.part_number for p in held.parts] == [1, 2]

    before = len(part_puts(bundle))
    resumed: list[agentfs.Upload] = []
    prog = ProgressLog()
    f = bundle.client().upload_file(local, "resumed.bin", threshold=0, progress=prog, on_session=resumed.append)
    assert resumed[0].id == first[0].id and len(resumed[0].parts) == 2
    assert part_numbers(part_puts(bundle)[before:]) == [3]
    # The two parts the session holds count as sent, each at once.
    steps = [b - a for a, b in zip([0] + [s for s, _ in prog.calls], [s for s, _ in prog.calls])]
    assert steps.count(PART_SIZE) >= 2, steps
    prog.check(size)
    assert f.sha256 == digest and f.size_bytes == size
    expect_content(bundle, f, data)


def test_upload_file_resends_parts_with_other_bytes(bundle: Bundle, tmp_path: Path) -> None:
    """A session holding one right part and one wrong one: only the wrong part and the missing one are sent."""
    c = bundle.client()
    size = 12 << 20
    local, data, digest = local_file(tmp_path, size, 4)
    u = c.create_upload("mixed.bin", size, sha256=digest)
    c.upload_part(u.id, 2, data[PART_SIZE:2 * PART_SIZE])
    c.upload_part(u.id, 1, b"x" * PART_SIZE)
    before = len(part_puts(bundle))
    resumed: list[agentfs.Upload] = []
    f = c.upload_file(local, "mixed.bin", threshold=0, on_session=resumed.append)
    assert resumed[0].id == u.id and len(resumed[0].parts) == 2
    assert part_numbers(part_puts(bundle)[before:]) == [1, 3]
    assert f.sha256 == digest
    expect_content(bundle, f, data)
    assert len(bundle.proxy.requests("POST", f"/v1/uploads/{u.id}/complete")) == 1


def test_upload_part_retried_whole(bundle: Bundle, tmp_path: Path) -> None:
    """A part answered 503 is sent again, whole, with the same key and digest; progress still ends at the total."""
    c = bundle.client()
    size = 6 << 20
    local, data, _ = local_file(tmp_path, size, 5)
    bundle.proxy.inject_where(is_part(2), 1, answer_problem(503, "STORAGE_UNAVAILABLE"))
    prog = ProgressLog()
    f = c.upload_file(local, "retried.bin", threshold=0, progress=prog)
    second = [s for s in part_puts(bundle) if s.path.endswith("/parts/2")]
    assert [s.status for s in second] == [503, 200]
    assert second[0].key == second[1].key and second[0].digest == second[1].digest
    assert [s.body_bytes for s in second] == [1 << 20, 1 << 20]
    prog.check(size)
    assert any(b < a for (a, _), (b, _) in zip(prog.calls, prog.calls[1:])), "the retried part was not taken back"
    expect_content(bundle, f, data)


def test_upload_replays_lost_responses(bundle: Bundle, tmp_path: Path) -> None:
    """With keys, a create, parts and a complete whose responses were lost are answered from what the server recorded."""
    c = bundle.client()
    local, data, _ = local_file(tmp_path, 6 << 20, 6)
    bundle.proxy.inject("POST", "/v1/uploads", 1, drop_after_commit)
    bundle.proxy.inject_where(is_part(1), 1, drop_after_commit)
    bundle.proxy.inject_where(is_part(2), 1, drop_after_commit)
    bundle.proxy.inject_where(lambda h: h.url_path.endswith("/complete"), 1, drop_after_commit)
    f = c.upload_file(local, "keyed.bin", threshold=0)
    groups: dict[str, list[Any]] = {}
    for s in bundle.proxy.seen():
        groups.setdefault(s.method + " " + s.path.rsplit("/", 1)[1], []).append(s)
    for name in ["POST uploads", "PUT 1", "PUT 2", "POST complete"]:
        a = groups[name]
        assert len(a) == 2 and a[0].status == 0 and a[0].server_status // 100 == 2, (name, a)
        assert a[1].replayed and a[1].key and a[1].key == a[0].key, (name, a)
    bundle.expect_one_file("keyed.bin", f.id)
    expect_content(bundle, f, data)


def test_upload_repeats_without_keys(bundle: Bundle, tmp_path: Path) -> None:
    """Without keys, a create, a part and a complete whose connections broke are sent again: one file."""
    c = bundle.client(idempotency_keys=False)
    local, data, _ = local_file(tmp_path, 6 << 20, 7)
    bundle.proxy.inject("POST", "/v1/uploads", 1, drop_after_commit)
    bundle.proxy.inject_where(is_part(1), 1, drop_after_commit)
    bundle.proxy.inject_where(lambda h: h.url_path.endswith("/complete"), 1, drop_after_commit)
    f = c.upload_file(local, "unkeyed.bin", threshold=0)
    assert all(s.key == "" for s in bundle.proxy.seen())
    completes = bundle.proxy.where(lambda s: s.path.endswith("/complete"))
    assert len(bundle.proxy.requests("POST", "/v1/uploads")) == 2 and len(part_puts(bundle)) == 3
    assert len(completes) == 2 and completes[1].status == 200
    bundle.expect_one_file("unkeyed.bin", f.id)
    expect_content(bundle, f, data)


def test_upload_file_small_and_too_large(bundle: Bundle, tmp_path: Path) -> None:
    """Below the threshold one POST; a POST the server finds too large falls back to a session."""
    c = bundle.client()
    small, small_data, small_sum = local_file(tmp_path, 1000, 8, "small.bin")
    prog = ProgressLog()
    f = c.upload_file(small, "small.bin", progress=prog)
    assert f.sha256 == small_sum and len(bundle.proxy.requests("POST", "/v1/files")) == 1
    assert bundle.proxy.requests("POST", "/v1/uploads") == []
    prog.check(1000)
    empty = tmp_path / "empty.bin"
    empty.write_bytes(b"")
    assert c.upload_file(empty, "empty.bin", threshold=0).size_bytes == 0

    big, big_data, big_sum = local_file(tmp_path, MAX_UPLOAD_BYTES + 1, 9, "big.bin")
    g = c.upload_file(big, "too-large.bin")
    posts = bundle.proxy.requests("POST", "/v1/files")
    assert posts[-1].status == 413 and len(bundle.proxy.requests("POST", "/v1/uploads")) == 1
    assert g.sha256 == big_sum
    expect_content(bundle, g, big_data)


def test_session_routes(bundle: Bundle, tmp_path: Path) -> None:
    c = bundle.client()
    size = PART_SIZE + 100
    _, data, digest = local_file(tmp_path, size, 10)
    u = c.create_upload("routes.bin", size, content_type="application/x-routes", sha256=digest)
    assert u.id.startswith("upl_") and (u.status, u.part_count, u.part_size, u.content_type) == (
        "pending", 2, PART_SIZE, "application/x-routes")
    again = c.create_upload("routes.bin", size, content_type="application/x-routes", sha256=digest)
    assert again.id == u.id  # the live matching session

    part = c.upload_part(u.id, 2, data[PART_SIZE:], sha256=sha(data[PART_SIZE:]))
    assert (part.part_number, part.size_bytes, part.sha256) == (2, 100, sha(data[PART_SIZE:]))
    with pytest.raises(agentfs.UnprocessableEntityError) as ei:
        c.complete_upload(u.id)
    p = expect_problem(ei.value, 422, "PARTS_MISSING")
    assert p.missing_parts == [1]
    with pytest.raises(agentfs.UnprocessableEntityError) as ei:
        c.upload_part(u.id, 1, data[:PART_SIZE - 1])
    expect_problem(ei.value, 422, "SIZE_MISMATCH")
    with pytest.raises(agentfs.UnprocessableEntityError) as ei:
        c.upload_part(u.id, 1, data[:PART_SIZE], sha256=sha(b"other"))
    expect_problem(ei.value, 422, "CHECKSUM_MISMATCH")
    c.upload_part(u.id, 1, data[:PART_SIZE])
    assert [p.part_number for p in c.get_upload(u.id).parts] == [1, 2]
    f = c.complete_upload(u.id)
    assert (f.sha256, f.size_bytes, f.content_type) == (digest, size, "application/x-routes")
    assert c.complete_upload(u.id).id == f.id  # a repeat answers the same file
    with pytest.raises(agentfs.ConflictError) as ei:
        c.abort_upload(u.id)
    expect_problem(ei.value, 409, "UPLOAD_COMPLETED")

    # Abort, safe to repeat; a part after it is refused.
    v = c.create_upload("aborted.bin", size)
    assert c.abort_upload(v.id).status == "aborted"
    assert c.abort_upload(v.id).status == "aborted"
    with pytest.raises(agentfs.ConflictError) as ei:
        c.upload_part(v.id, 1, data[:PART_SIZE])
    expect_problem(ei.value, 409, "UPLOAD_ABORTED")

    # A wrong whole-file SHA-256 fails the session for good.
    w = c.create_upload("mismatch.bin", size, sha256=sha(b"something else"))
    c.upload_part(w.id, 1, data[:PART_SIZE])
    c.upload_part(w.id, 2, data[PART_SIZE:])
    with pytest.raises(agentfs.UnprocessableEntityError) as ei:
        c.complete_upload(w.id)
    expect_problem(ei.value, 422, "CHECKSUM_MISMATCH")
    failed = c.get_upload(w.id)
    assert failed.status == "failed" and failed.error is not None and failed.error.code == "CHECKSUM_MISMATCH"
    assert bundle.files_at("mismatch.bin") == []
    with pytest.raises(agentfs.NotFoundError):
        c.get_upload("upl_nope")
    with pytest.raises(ValueError):
        c.upload_part(u.id, 0, b"x")
    with pytest.raises(ValueError, match="size"):
        c.upload_part(u.id, 1, iter([b"x"]))


def test_answers_before_the_body_is_read(bundle: Bundle, tmp_path: Path) -> None:
    """The server answers some requests without reading their body (a replay of a part that declared its
    digest, a 413) and stops reading; the client still gets that answer, straight from the server."""
    c = agentfs.Client(bundle.server.url, bundle.token, retry=agentfs.RetryPolicy(max_attempts=1))
    part = local_file(tmp_path, PART_SIZE, 12)[1]
    u = c.create_upload("early.bin", PART_SIZE + 1)
    first = c.upload_part(u.id, 1, part, sha256=sha(part), idempotency_key="early-part-1")
    for _ in range(3):
        again = c.upload_part(u.id, 1, part, sha256=sha(part), idempotency_key="early-part-1")
        assert again.sha256 == first.sha256 == sha(part)
    big = local_file(tmp_path, MAX_UPLOAD_BYTES + 1, 13, "big.bin")[0]
    with pytest.raises(agentfs.PayloadTooLargeError) as ei:
        c.put_file("early-big.bin", big)
    expect_problem(ei.value, 413, "PAYLOAD_TOO_LARGE")
    c.close()


def test_session_shows_its_expiry(bundle: Bundle) -> None:
    """A session carries the expires_in its file will get (None without one)."""
    c = bundle.client()
    assert c.create_upload("exp/session-2h.bin", 10, expires_in=7200).expires_in == 7200
    plain = c.create_upload("exp/session-plain.bin", 10)
    assert plain.expires_in is None and c.get_upload(plain.id).expires_in is None
