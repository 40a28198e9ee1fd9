"""AgentFS: file storage for AI agents that is safe to retry.

    import agentfs

    client = agentfs.Client()  # AGENTFS_URL and AGENTFS_TOKEN
    f = client.put_file("reports/summary.md", b"# Summary", content_type="text/markdown")
    for g in client.list_files(run_id="run-1"):
        print(g.path, g.size_bytes)

Every write carries one Idempotency-Key across its retries; errors the server
answers are ``agentfs.Problem`` subclasses carrying the problem document.
"""

from ._async_client import AsyncClient, AsyncContent
from ._base import DEFAULT_PARALLEL, DEFAULT_SESSION_THRESHOLD, MAX_BATCH_WAIT, digest_of
from ._client import Client, Content
from ._errors import (
    AgentFSError,
    APIConnectionError,
    AuthenticationError,
    BadRequestError,
    BodyNotRewindableError,
    ConflictError,
    ContentBlockedError,
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
from ._models import (
    AsyncPage,
    Batch,
    BatchCounts,
    BatchItem,
    BatchOp,
    File,
    Operation,
    OperationResource,
    Page,
    Protocol,
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
    "File",
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
    "PreconditionFailedError",
    "PayloadTooLargeError",
    "UnprocessableEntityError",
    "RateLimitError",
    "ContentBlockedError",
    "ServerError",
]
