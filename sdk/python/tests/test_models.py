"""Reading the API's JSON objects into the models: each field as its declared type says.

Needs no server: the objects are written here as the API answers them.
"""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from agentfs import Batch, Change, File, Fork, Operation, RunRecovery, Token, Upload


def test_token_reads_its_lists() -> None:
    t = Token.from_dict({"id": "tok_1", "name": "ci", "scopes": ["read", "write", 3], "prefixes": ["/a/"],
                         "max_bytes": 10, "bytes_written": 4})
    assert t.scopes == ["read", "write"]
    assert t.prefixes == ["/a/"]
    assert (t.token, t.max_bytes, t.bytes_written, t.object) == (None, 10, 4, "token")


@pytest.mark.parametrize(
    "doc, want",
    [
        ({}, ("", "", 0)),
        ({"from": "/src/", "to": "/dst/", "files": 2}, ("/src/", "/dst/", 2)),
        ({"from": 7, "to": None, "files": "2"}, ("", "", 0)),
    ],
)
def test_fork_reads_from_into_from_(doc: dict, want: tuple) -> None:
    f = Fork.from_dict(doc)
    assert (f.from_, f.to, f.files) == want


def test_nested_objects_lists_and_absent_members() -> None:
    f = File.from_dict({"id": "f", "forked_from": {"file_id": "g", "version": 2},
                        "created_at": "2024-05-01T10:00:00.5Z"})
    assert f.forked_from is not None and (f.forked_from.file_id, f.forked_from.version) == ("g", 2)
    assert f.created_at == datetime(2024, 5, 1, 10, 0, 0, 500000, tzinfo=timezone.utc)
    assert File.from_dict({"forked_from": "g"}).forked_from is None

    b = Batch.from_dict({"id": "b", "items": [{"index": 1, "error": {"status": 409, "code": "CONFLICT"}}, "x"]})
    assert b.counts.total == 0
    assert len(b.items) == 1 and b.items[0].error is not None and b.items[0].error.code == "CONFLICT"
    assert b.items[0].file is None

    c = Change.from_dict({"path": "/p", "from": {"version": 1, "size_bytes": 3}})
    assert c.from_ is not None and (c.from_.version, c.from_.size_bytes) == (1, 3)
    assert c.to is None

    u = Upload.from_dict({"id": "u"})
    assert (u.if_exists, u.parts, u.error) == ("error", [], None)

    op = Operation.from_dict({"response": {"a": 1}, "resource": {"object": "file", "id": "f"}, "redacted": ["url", 2]})
    assert op.response == {"a": 1}
    assert op.resource is not None and (op.resource.object, op.resource.id) == ("file", "f")
    assert op.redacted == ["url"]

    r = RunRecovery.from_dict({"in_flight": {"uploads": [{"id": "u", "parts_received": [1, True, 2], "next": {}}]}})
    assert r.in_flight.uploads[0].parts_received == [1, 2]
    assert r.in_flight.batches == [] and r.confirmed.counts.moved == 0
