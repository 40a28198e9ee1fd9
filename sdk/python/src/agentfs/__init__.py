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
from ._errors import (
    AgentFSError,
    APIConnectionError,
    AuthenticationError,
    BadRequestError,
    BodyNotRewindableError,
    ChangedSinceRunError,
    ConflictError,
    ContentBlockedError,
    CursorExpiredError,
    FieldError,
    IdempotencyConflictError,
    NotFoundError,
    OperationInProgressError,
    PathExistsError,
    PayloadTooLargeError,
    PermissionDeniedError,
    PreconditionFailedError,
    Problem,
    RateLimitError,
    ServerError,
    UnprocessableEntityError,
)
from ._events import AsyncEventFollower, EventFollower
from ._models import (
    AsyncPage,
    Batch,
    BatchCounts,
    BatchItem,
    BatchOp,
    Event,
    EventPage,
    File,
    FileVersion,
    Link,
    Operation,
    OperationResource,
    Page,
    Protocol,
    Run,
    RunCounts,
    Upload,
    UploadPart,
)
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
    "File",
    "FileVersion",
    "Link",
    "Event",
    "EventPage",
    "EventFollower",
    "AsyncEventFollower",
    "Run",
    "RunCounts",
    "Upload",
    "UploadPart",
    "Batch",
    "BatchCounts",
    "BatchItem",
    "BatchOp",
    "Operation",
    "OperationResource",
    "Page",
    "AsyncPage",
    "Protocol",
    "AgentFSError",
    "APIConnectionError",
    "BodyNotRewindableError",
    "FieldError",
    "Problem",
    "BadRequestError",
    "AuthenticationError",
    "PermissionDeniedError",
    "NotFoundError",
    "ConflictError",
    "PathExistsError",
    "IdempotencyConflictError",
    "OperationInProgressError",
    "ChangedSinceRunError",
    "CursorExpiredError",
    "PreconditionFailedError",
    "PayloadTooLargeError",
    "UnprocessableEntityError",
    "RateLimitError",
    "ContentBlockedError",
    "ServerError",
]
