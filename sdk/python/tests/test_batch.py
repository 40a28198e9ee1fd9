"""Batches: admission with a key, waiting for a terminal state, and the items' outcomes."""

from __future__ import annotations

import time

import pytest

import agentfs
from conftest import Bundle, expect_problem, sha
from faultproxy import drop_after_commit


def client(bundle: Bundle, **kw: object) -> agentfs.Client:
    """A client whose waits are real: wait_batch polls the server at its own pace (100 ms, growing)."""
    return bundle.client(sleep=time.sleep, **kw)


def test_batch(bundle: Bundle) -> None:
    c = client(bundle, run_id="run-batch")
    taken = bundle.direct.put_file("taken.txt", b"mine")
    binary = bytes([0xFF, 0x00, 0xFE])
    ops = [
        agentfs.BatchOp.put("b/a.txt", "hello", content_type="text/plain"),
        agentfs.BatchOp.put("taken.txt", b"theirs"),
        agentfs.BatchOp.put("b/bin", binary),
        agentfs.BatchOp.put("b/empty", b""),
        agentfs.BatchOp.copy(taken.id, "b/copy.txt"),
    ]
    admitted = c.create_batch(ops)
    assert admitted.id.startswith("batch_") and admitted.counts.total == 5 and len(admitted.items) == 5
    assert not admitted.terminal
    posts = bundle.proxy.requests("POST", "/v1/batch")
    assert len(posts) == 1 and posts[0].key and posts[0].status == 202

    done = c.wait_batch(admitted.id, timeout=60)
    assert done.status == "partially_succeeded" and done.completed_at is not None
    assert done.counts == agentfs.BatchCounts(total=5, succeeded=4, failed=1, pending=0)
    failed = done.failed_items()
    assert [it.index for it in failed] == [1] and failed[0].file is None
    err = failed[0].error
    assert isinstance(err, agentfs.PathExistsError)
    assert (err.status, err.code, err.existing_file_id) == (409, "PATH_EXISTS", taken.id)
    want = {0: sha(b"hello"), 2: sha(binary), 3: sha(b""), 4: sha(b"mine")}
    for i, digest in want.items():
        it = done.items[i]
        assert it.status == "succeeded" and it.error is None and it.file is not None, it
        assert it.file.sha256 == digest and it.file.run_id == "run-batch"
    assert done.items[0].file.content_type == "text/plain" and done.items[0].path == "b/a.txt"
    assert [it.index for it in done.succeeded_items()] == [0, 2, 3, 4]


def test_batch_repeat_with_key_and_wait(bundle: Bundle) -> None:
    c = client(bundle)
    ops = [agentfs.BatchOp.put("r/1.txt", "1")]
    first = c.create_batch(ops, idempotency_key="batch-repeat-1", wait=10)
    assert first.status == "succeeded"
    again = c.create_batch(ops, idempotency_key="batch-repeat-1")
    assert (again.id, again.status) == (first.id, "succeeded")
    with pytest.raises(agentfs.IdempotencyConflictError) as ei:
        c.create_batch([agentfs.BatchOp.put("r/1.txt", "2")], idempotency_key="batch-repeat-1")
    expect_problem(ei.value, 409, "IDEMPOTENCY_CONFLICT")
    # A put's own key is shared with standalone uploads: the item replays.
    f = c.put_file("r/keyed.txt", b"k", idempotency_key="item-key-1")
    b = c.create_batch([agentfs.BatchOp.put("r/keyed.txt", "k", idempotency_key="item-key-1")], wait=10)
    assert b.items[0].replayed and b.items[0].file is not None and b.items[0].file.id == f.id


def test_batch_lost_response_replays(bundle: Bundle) -> None:
    c = client(bundle)
    bundle.proxy.inject("POST", "/v1/batch", 1, drop_after_commit)
    got = c.create_batch([agentfs.BatchOp.put("lost/1.txt", "1")])
    posts = bundle.proxy.requests("POST", "/v1/batch")
    assert len(posts) == 2 and posts[0].server_status == 202 and posts[0].status == 0
    assert posts[1].key == posts[0].key and posts[1].replayed
    assert c.wait_batch(got.id, timeout=60).status == "succeeded"
    assert len(bundle.files_at("lost/1.txt")) == 1


def test_batch_key_even_without_keys_and_delete_restore(bundle: Bundle) -> None:
    plain = client(bundle, idempotency_keys=False)
    f = bundle.direct.put_file("del.txt", b"d")
    b = plain.create_batch([agentfs.BatchOp.delete(f.id), agentfs.BatchOp.restore(f.id)], wait=10)
    assert b.status == "succeeded" and [it.op for it in b.items] == ["delete", "restore"]
    posts = bundle.proxy.requests("POST", "/v1/batch")
    assert len(posts) == 1 and posts[0].key
    assert bundle.direct.get_file(f.id).deleted_at is None


def test_batch_invalid(bundle: Bundle) -> None:
    c = client(bundle)
    with pytest.raises(agentfs.UnprocessableEntityError) as ei:
        c.create_batch([agentfs.BatchOp.put("ok.txt", b""), {"op": "move"}])
    p = expect_problem(ei.value, 422, "VALIDATION_FAILED")
    assert [e.field for e in p.errors] == ["operations[1].op"]
    before = len(bundle.proxy.requests("POST", "/v1/batch"))
    with pytest.raises(ValueError):
        c.create_batch([agentfs.BatchOp.put("ok.txt", b"")], wait=31)
    assert len(bundle.proxy.requests("POST", "/v1/batch")) == before
    with pytest.raises(agentfs.NotFoundError):
        c.get_batch("batch_nope")
    assert agentfs.BatchOp.put("e", b"").to_dict() == {"op": "put", "path": "e", "content": ""}
    assert agentfs.BatchOp.delete("file_1").to_dict() == {"op": "delete", "file_id": "file_1"}
