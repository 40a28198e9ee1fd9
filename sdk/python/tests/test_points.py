"""Points in time: checkpoints, diff (JSON and patch), restore and its plan."""

from __future__ import annotations

import pytest

import agentfs
from conftest import Bundle


def test_checkpoint_diff_restore(bundle: Bundle) -> None:
    c = bundle.client(run_id="points-run")
    c.put_file("pts/a.txt", b"alpha\n")
    cp = c.create_checkpoint(name="pts-before", prefix="pts/")
    assert cp.name == "pts-before" and cp.id.startswith("ckpt_") and cp.object == "checkpoint"
    with pytest.raises(agentfs.CheckpointExistsError):
        c.create_checkpoint(name="pts-before")
    c.put_file("pts/a.txt", b"broken\n", if_exists="replace")
    c.put_file("pts/new.txt", b"new\n")

    changes = c.diff("pts-before", prefix="pts/")
    assert [(ch.change, ch.path) for ch in changes] == [("modified", "pts/a.txt"), ("added", "pts/new.txt")]
    assert changes[0].from_ is not None and changes[0].from_.version == 1
    patch = c.diff_patch("pts-before", prefix="pts/")
    assert "-alpha\n+broken\n" in patch and "new file mode 100644\n" in patch

    plan = c.plan_restore("pts/", "pts-before")
    assert len(plan.items) == 2 and plan.object == "restore_plan"
    b = c.restore("pts/", "pts-before", wait=True, timeout=60)
    assert b.status == "succeeded"
    assert c.diff("pts-before", prefix="pts/") == []
    assert [x.id for x in c.list_checkpoints()] == [cp.id]
    assert c.get_checkpoint("pts-before").id == cp.id
    c.delete_checkpoint("pts-before")
    with pytest.raises(agentfs.NotFoundError):
        c.get_checkpoint("pts-before")
