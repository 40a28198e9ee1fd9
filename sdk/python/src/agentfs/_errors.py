"""Errors: the server's problems (RFC 9457) and failures without an answer."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping, Optional

if TYPE_CHECKING:
    from ._models import MergeConflict

__all__ = [
    "AgentFSError",
    "APIConnectionError",
    "BodyNotRewindableError",
    "RedirectError",
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
    "CheckpointExistsError",
    "CursorExpiredError",
    "PreconditionFailedError",
    "PayloadTooLargeError",
    "UnprocessableEntityError",
    "RateLimitError",
    "ContentBlockedError",
    "ServerError",
]


class AgentFSError(Exception):
    """Base of every error this package raises, so one except clause catches them all."""


class APIConnectionError(AgentFSError):
    """No answer came: the connection failed or broke before a response.

    The request may or may not have taken effect. The client already retried
    it if that was safe (the client retry policy); the underlying httpx error is
    ``__cause__``.
    """


class BodyNotRewindableError(APIConnectionError):
    """A retry was needed, but the request body was a stream already read.

    Pass bytes, a path, a seekable file, or a function that returns a fresh
    iterator, so that the body can be sent again.
    """


class RedirectError(AgentFSError):
    """S3 refused the presigned URL a content request with ``redirect=True`` was sent to.

    An expired URL, or a public S3 endpoint that does not reach the bucket.
    ``status`` is S3's HTTP status, ``code`` its error code when it named one.
    """

    def __init__(self, status: int, code: Optional[str] = None) -> None:
        self.status = status
        self.code = code
        super().__init__(f"the presigned S3 URL of the content was refused: {status}" + (f" {code}" if code else ""))


@dataclass(frozen=True)
class FieldError:
    """One offending field, query parameter or header of a request."""

    field: str
    message: str


class Problem(AgentFSError):
    """An error the server answered with: an application/problem+json document.

    ``code`` is the stable thing to branch on (``PATH_EXISTS``,
    ``NOT_FOUND``, ...); the subclasses below group the common ones so that
    ``except agentfs.NotFoundError`` reads naturally. ``request_id`` names the
    request in the server's logs.
    """

    def __init__(
        self,
        *,
        status: int,
        code: Optional[str] = None,
        title: str = "",
        detail: Optional[str] = None,
        type: Optional[str] = None,
        instance: Optional[str] = None,
        retryable: bool = False,
        retry_after: Optional[float] = None,
        request_id: Optional[str] = None,
        existing_file_id: Optional[str] = None,
        missing_parts: Optional[list[int]] = None,
        missing_scope: Optional[str] = None,
        conflicts: Optional[list[MergeConflict]] = None,
        errors: Optional[list[FieldError]] = None,
        body: Optional[Mapping[str, Any]] = None,
    ) -> None:
        self.status = status
        self.code = code
        self.title = title
        self.detail = detail
        self.type = type
        self.instance = instance
        self.retryable = retryable
        #: The response's Retry-After hint in seconds, None when absent.
        self.retry_after = retry_after
        self.request_id = request_id
        #: The live file holding the path, with PATH_EXISTS.
        self.existing_file_id = existing_file_id
        #: The parts an upload still lacks, with PARTS_MISSING.
        self.missing_parts = list(missing_parts or [])
        #: The scope the token lacks, with FORBIDDEN ("read" or "write").
        self.missing_scope = missing_scope
        #: Every path changed on both sides (MergeConflict), with MERGE_CONFLICT.
        self.conflicts = list(conflicts or [])
        #: The offending fields, with VALIDATION_FAILED and others.
        self.errors = list(errors or [])
        #: The problem document as the server sent it (empty if it was not JSON).
        self.body = dict(body or {})
        super().__init__(str(self))

    def __str__(self) -> str:
        s = f"{self.status}"
        if self.code:
            s += f" {self.code}"
        if self.detail:
            s += f": {self.detail}"
        elif self.title:
            s += f": {self.title}"
        for label, value in (("existing_file_id", self.existing_file_id), ("missing_parts", self.missing_parts),
                             ("missing_scope", self.missing_scope), ("request", self.request_id)):
            if value:
                s += f" ({label} {value})"
        return s

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self})"

    def __reduce__(self) -> Any:
        return (_rebuild_problem, (type(self), self.__dict__.copy()))


def _rebuild_problem(cls: type, state: dict[str, Any]) -> Problem:
    p: Problem = Problem.__new__(cls)
    p.__dict__.update(state)
    Exception.__init__(p, str(p))
    return p


class BadRequestError(Problem):
    """400: the request could not be parsed (INVALID_REQUEST, INVALID_HEADER, ...)."""


class AuthenticationError(Problem):
    """401 UNAUTHENTICATED: the token is missing, unknown or revoked."""


class PermissionDeniedError(Problem):
    """403 FORBIDDEN: the token lacks the scope."""


class NotFoundError(Problem):
    """404 NOT_FOUND: no such resource for this token's subject."""


class ConflictError(Problem):
    """409: the request conflicts with the stored state."""


class PathExistsError(ConflictError):
    """409 PATH_EXISTS: a live file holds the path; see ``existing_file_id``."""


class IdempotencyConflictError(ConflictError):
    """409 IDEMPOTENCY_CONFLICT: the key was used for a different request."""


class OperationInProgressError(ConflictError):
    """409 OPERATION_IN_PROGRESS: another request still holds the key.

    The client waits for it and polls /v1/operations/{key}; this surfaces only
    when the attempts ran out first.
    """


class ChangedSinceRunError(ConflictError):
    """409 CHANGED_SINCE_RUN: another run changed the file after the run being reverted.

    It fails that file's item of a run revert; ``revert_run(..., force=True)``
    undoes the file anyway.
    """


class CheckpointExistsError(ConflictError):
    """409 CHECKPOINT_EXISTS: you already have a checkpoint of this name; pick another or delete that one."""


class CursorExpiredError(Problem):
    """410 CURSOR_EXPIRED: the events after this cursor are past the server's event retention.

    Follow again with ``after="now"``, or without ``after`` for the oldest event kept.
    """


class PreconditionFailedError(Problem):
    """412 PRECONDITION_FAILED: If-Match or If-None-Match did not hold."""


class PayloadTooLargeError(Problem):
    """413 PAYLOAD_TOO_LARGE: too big for one request; use an upload session."""


class UnprocessableEntityError(Problem):
    """422: well-formed but not allowed (VALIDATION_FAILED, INVALID_PATH, CHECKSUM_MISMATCH, ...)."""


class RateLimitError(Problem):
    """429 RATE_LIMITED or QUOTA_EXCEEDED: wait as ``retry_after`` says."""


class ContentBlockedError(Problem):
    """451 CONTENT_BLOCKED: an operator blocked the file."""


class ServerError(Problem):
    """5xx: the server or its storage failed; nothing half-written is visible."""


_BY_CODE: dict[str, type[Problem]] = {
    "PATH_EXISTS": PathExistsError,
    "IDEMPOTENCY_CONFLICT": IdempotencyConflictError,
    "OPERATION_IN_PROGRESS": OperationInProgressError,
    "CHANGED_SINCE_RUN": ChangedSinceRunError,
    "CHECKPOINT_EXISTS": CheckpointExistsError,
    "CURSOR_EXPIRED": CursorExpiredError,
}

_BY_STATUS: dict[int, type[Problem]] = {
    400: BadRequestError,
    401: AuthenticationError,
    403: PermissionDeniedError,
    404: NotFoundError,
    409: ConflictError,
    410: CursorExpiredError,
    412: PreconditionFailedError,
    413: PayloadTooLargeError,
    422: UnprocessableEntityError,
    429: RateLimitError,
    451: ContentBlockedError,
}


def _problem_class(status: int, code: Optional[str]) -> type[Problem]:
    if code and code in _BY_CODE:
        return _BY_CODE[code]
    if status >= 500:
        return ServerError
    return _BY_STATUS.get(status, Problem)


def retryable_status(status: int) -> bool:
    """408, 429 and 5xx are worth repeating (the error contract and the client retry policy)."""
    return status in (408, 429) or 500 <= status <= 599


def problem_from_dict(
    status: Optional[int],
    data: Mapping[str, Any],
    *,
    retry_after: Optional[float] = None,
    request_id: Optional[str] = None,
) -> Problem:
    """Build the typed Problem of a problem document (also one inside a batch item)."""
    st = status if status is not None else _int(data.get("status"), 0)
    code = data.get("code") if isinstance(data.get("code"), str) else None
    errors = []
    for e in data.get("errors") or []:
        if isinstance(e, Mapping):
            errors.append(FieldError(field=str(e.get("field", "")), message=str(e.get("message", ""))))
    missing = [m for m in (data.get("missing_parts") or []) if isinstance(m, int)]
    cls = _problem_class(st, code)
    return cls(
        status=st,
        code=code,
        title=str(data.get("title") or ""),
        detail=data.get("detail") if isinstance(data.get("detail"), str) else None,
        type=data.get("type") if isinstance(data.get("type"), str) else None,
        instance=data.get("instance") if isinstance(data.get("instance"), str) else None,
        retryable=bool(data.get("retryable", retryable_status(st))),
        retry_after=retry_after,
        request_id=(data.get("request_id") if isinstance(data.get("request_id"), str) else None) or request_id,
        existing_file_id=data.get("existing_file_id") if isinstance(data.get("existing_file_id"), str) else None,
        missing_parts=missing,
        missing_scope=data.get("missing_scope") if isinstance(data.get("missing_scope"), str) else None,
        conflicts=_conflicts(data.get("conflicts")),
        errors=errors,
        body=data,
    )


_HTTP_REASONS = {
    400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found",
    405: "Method Not Allowed", 408: "Request Timeout", 409: "Conflict", 410: "Gone", 411: "Length Required",
    412: "Precondition Failed", 413: "Payload Too Large", 415: "Unsupported Media Type",
    416: "Range Not Satisfiable", 422: "Unprocessable Entity", 429: "Too Many Requests",
    451: "Unavailable For Legal Reasons", 500: "Internal Server Error", 502: "Bad Gateway",
    503: "Service Unavailable", 504: "Gateway Timeout",
}


def problem_from_response(
    status: int, headers: Mapping[str, str], body: bytes, *, retry_after: Optional[float]
) -> Problem:
    """Read an error response into a Problem.

    A body that is not a problem document (a proxy's HTML page, say) still
    gives a Problem with the status and no code: the server did not name one.
    """
    request_id = headers.get("x-request-id")
    data: Any = None
    try:
        data = json.loads(body.decode("utf-8")) if body else None
    except (UnicodeDecodeError, ValueError):
        data = None
    if isinstance(data, Mapping) and _int(data.get("status"), 0) != 0:
        return problem_from_dict(status, data, retry_after=retry_after, request_id=request_id)
    text = body.decode("utf-8", "replace").strip()
    if len(text) > 200:
        text = text[:200] + "…"
    cls = _problem_class(status, None)
    return cls(
        status=status,
        title=_HTTP_REASONS.get(status, "Error"),
        detail=text or None,
        retryable=retryable_status(status),
        retry_after=retry_after,
        request_id=request_id,
    )


def _int(v: Any, default: int) -> int:
    return v if isinstance(v, int) and not isinstance(v, bool) else default


def _conflicts(v: Any) -> list[MergeConflict]:
    """The MergeConflicts of a MERGE_CONFLICT problem."""
    from ._models import MergeConflict  # noqa: F811 (_models imports this module)

    return [MergeConflict.from_dict(c) for c in v or [] if isinstance(c, Mapping)]
