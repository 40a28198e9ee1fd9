"""Forks and merges: a copy-on-write fork, changes on both sides, a conflict and its resolution."""

from __future__ import annotations

import pytest

import agentfs
from conftest import Bundle


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
