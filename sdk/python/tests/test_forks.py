"""Forks and merges: a copy-on-write fork, changes on both sides, a conflict and its resolution."""

from __future__ import annotations

import subprocess

import pytest

import agentfs
from conftest import Bundle, _subject


def test_fork_and_merge(bundle: Bundle) -> None:
    c = bundle.client(run_id="forks-run")
    c.put_file("fsrc/a.txt", b"alpha\n")
    c.put_file("fsrc/b.txt", b"beta\n")
    f = c.fork("fsrc/", "fdst/")
    assert f.id.startswith("fork_") and f.from_ == "fsrc/" and f.to == "fdst/" and f.files == 2
    copied = c.list_files(prefix="fdst/").data
    assert all(x.forked_from is not None and x.version == 1 for x in copied)
    with pytest.raises(agentfs.PathExistsError):
        c.fork("fsrc/", "fdst/")

    c.put_file("fdst/a.txt", b"alpha, fork\n", if_exists="replace")
    c.put_file("fdst/b.txt", b"beta, fork\n", if_exists="replace")
    c.put_file("fsrc/b.txt", b"beta, target\n", if_exists="replace")
    plan = c.merge(f.id, dry_run=True)
    assert plan.dry_run and [ch.path for ch in plan.applied] == ["fsrc/a.txt"]
    with pytest.raises(agentfs.Problem) as e:
        c.merge(f.id)
    assert e.value.code == "MERGE_CONFLICT" and [x.path for x in e.value.conflicts] == ["fsrc/b.txt"]
    m = c.merge(f.id, on_conflict="target")
    assert [ch.path for ch in m.applied] == ["fsrc/a.txt"] and m.conflicts[0].resolution == "target"
    assert [x.id for x in c.list_forks()] == [f.id]
    assert c.get_fork(f.id).merged_at is not None
    c.delete_fork(f.id)
    with pytest.raises(agentfs.NotFoundError):
        c.get_fork(f.id)


def _scoped_token(bundle: Bundle, request: pytest.FixtureRequest, prefix: str) -> str:
    """A token of the test's subject that sees and touches only prefix."""
    out = subprocess.run([bundle.server.bin, "token", "create", "--subject", _subject(request.node.name),
                          "--prefix", prefix], env=bundle.server.env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip().splitlines()[-1].strip()


def test_forks_held_to_a_scoped_token(bundle: Bundle, request: pytest.FixtureRequest) -> None:
    root = bundle.client()
    root.put_file("q/a.txt", b"outside\n")
    outside = root.fork("q/", "p/q-copy/")
    root.put_file("p/src/a.txt", b"inside\n")
    child = agentfs.Client(bundle.server.url, _scoped_token(bundle, request, "p/"),
                           retry=agentfs.RetryPolicy(max_attempts=1))
    try:
        inside = child.fork("p/src/", "p/dst/")
        assert inside.files == 1
        with pytest.raises(agentfs.PermissionDeniedError):
            child.fork("q/", "p/x/")
        with pytest.raises(agentfs.PermissionDeniedError):
            child.fork("p/src/", "q/x/")
        with pytest.raises(agentfs.NotFoundError):
            child.merge(outside.id)
        with pytest.raises(agentfs.NotFoundError):
            child.merge(outside.id, dry_run=True)
        with pytest.raises(agentfs.NotFoundError):
            child.get_fork(outside.id)
        with pytest.raises(agentfs.NotFoundError):
            child.delete_fork(outside.id)
        assert [f.id for f in child.list_forks().data] == [inside.id]
        assert child.merge(inside.id).applied == []
        assert sorted(f.id for f in root.list_forks().data) == sorted([inside.id, outside.id])
    finally:
        child.close()
