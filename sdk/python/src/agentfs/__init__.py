"""AgentFS: file storage for AI agents that is safe to retry.

    import agentfs

    client = agentfs.Client()  # AGENTFS_URL and AGENTFS_TOKEN
    f = client.put_file("reports/summary.md", b"# Summary", content_type="text/markdown")
    for g in client.list_files(run_id="run-1"):
        print(g.path, g.size_bytes)

    for e in client.follow_events(run_id="run-1", after=agentfs.EVENTS_NOW):
        print(e.type, e.path)  # as they commit, each once, across dropped connections

Every write carries one Idempotency-Key across its retries; errors the server
answers are ``agentfs.Problem`` subclasses carrying the problem document.
"""

from . import _errors, _models
from ._async_client import AsyncClient, AsyncContent
from ._base import (
    DEFAULT_PARALLEL,
    DEFAULT_SESSION_THRESHOLD,
    EVENTS_NOW,
    MAX_BATCH_WAIT,
    MAX_EVENT_WAIT,
    digest_of,
)
from ._client import Client, Content
from ._errors import *  # noqa: F401,F403  (their __all__ is part of this one)
from ._events import AsyncEventFollower, EventFollower
from ._models import *  # noqa: F401,F403
from ._request import NOT_GIVEN, new_idempotency_key
from ._retry import RetryPolicy
from ._version import __version__

__all__ = [
    "__version__",
    "Client",
    "AsyncClient",
    "Content",
    "AsyncContent",
    "RetryPolicy",
    "NOT_GIVEN",
    "new_idempotency_key",
    "digest_of",
    "DEFAULT_PARALLEL",
    "DEFAULT_SESSION_THRESHOLD",
    "MAX_BATCH_WAIT",
    "MAX_EVENT_WAIT",
    "EVENTS_NOW",
    "EventFollower",
    "AsyncEventFollower",
    *_models.__all__,
    *_errors.__all__,
]
