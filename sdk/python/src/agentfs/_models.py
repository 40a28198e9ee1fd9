"""Typed results: the JSON objects of the API (openapi.yaml) as dataclasses."""

from __future__ import annotations

import base64
import json
import re
from dataclasses import MISSING, dataclass, field, fields
from datetime import datetime, timedelta, timezone
from typing import Any, Callable, Generic, Iterator, Mapping, Optional, TypeVar, Union, cast

from ._errors import Problem, problem_from_dict

__all__ = [
    "RunRecovery",
    "RecoveryConfirmed",
    "RecoveryOperation",
    "RecoveryInFlight",
    "RecoveryUpload",
    "RecoveryBatch",
    "Next",
    "File",
    "Folder",
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
    "FileVersion",
    "Link",
    "Token",
    "Webhook",
    "WebhookDelivery",
    "Event",
    "EventPage",
    "Run",
    "RunCounts",
    "RunRevertPlan",
    "RunRevertStep",
    "SearchMatch",
    "SearchSkipped",
    "SearchResults",
    "AsyncSearchResults",
    "Checkpoint",
    "FileVersionRef",
    "Fork",
    "Merge",
    "MergeConflict",
    "MergeSide",
    "Change",
    "ChangeSide",
    "RestorePlan",
]

T = TypeVar("T")

_TIME = re.compile(
    r"^(\d{4}-\d{2}-\d{2})[Tt ](\d{2}:\d{2}:\d{2})(?:\.(\d+))?(Z|z|[+-]\d{2}:\d{2})$"
)


def parse_time(v: Any) -> Optional[datetime]:
    """Parse an RFC 3339 time (nanosecond fractions included) into an aware datetime."""
    if not isinstance(v, str):
        return None
    m = _TIME.match(v)
    if not m:
        return None
    day, clock, frac, zone = m.groups()
    micro = (frac or "").ljust(6, "0")[:6]
    if zone in ("Z", "z"):
        tz = timezone.utc
    else:
        sign = 1 if zone[0] == "+" else -1
        tz = timezone(sign * timedelta(hours=int(zone[1:3]), minutes=int(zone[4:6])))
    try:
        base = datetime.strptime(f"{day}T{clock}", "%Y-%m-%dT%H:%M:%S")
    except ValueError:
        return None
    return base.replace(microsecond=int(micro), tzinfo=tz)


def seconds_of(what: str, v: Union[int, float, timedelta, None]) -> Optional[int]:
    """A delay in whole seconds (a fraction rounded up), from seconds or a timedelta; None stays None."""
    if v is None:
        return None
    if isinstance(v, timedelta):
        secs = v.total_seconds()
    elif isinstance(v, (int, float)) and not isinstance(v, bool):
        secs = float(v)
    else:
        raise TypeError(f"{what} {v!r}: want seconds or a datetime.timedelta")
    if secs <= 0 or secs != secs:
        raise ValueError(f"{what} {v!r} must be positive")
    whole = int(secs)
    return whole if whole == secs else whole + 1


def _s(d: Mapping[str, Any], k: str, default: str = "") -> str:
    v = d.get(k)
    return v if isinstance(v, str) else default


def _opt_s(d: Mapping[str, Any], k: str) -> Optional[str]:
    v = d.get(k)
    return v if isinstance(v, str) else None


def _i(d: Mapping[str, Any], k: str, default: int = 0) -> int:
    v = d.get(k)
    return v if isinstance(v, int) and not isinstance(v, bool) else default


def _opt_i(d: Mapping[str, Any], k: str) -> Optional[int]:
    v = d.get(k)
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _map(v: Any) -> Mapping[str, Any]:
    return v if isinstance(v, Mapping) else {}


def _ints(v: Any) -> list[int]:
    return [n for n in v or [] if isinstance(n, int) and not isinstance(n, bool)]


def _strings(v: Any) -> list[str]:
    return [x for x in v if isinstance(x, str)] if isinstance(v, list) else []


def _problem(v: Any) -> Optional[Problem]:
    return problem_from_dict(None, v) if isinstance(v, Mapping) else None


#: How a field of each declared type is read from the JSON member of its name (given the field's default).
_READERS: dict[str, Callable[[Mapping[str, Any], str, Any], Any]] = {
    "str": lambda d, k, default: _s(d, k, "" if default is MISSING else default),
    "Optional[str]": lambda d, k, default: _opt_s(d, k),
    "int": lambda d, k, default: _i(d, k, 0 if default is MISSING else default),
    "Optional[int]": lambda d, k, default: _opt_i(d, k),
    "bool": lambda d, k, default: bool(d.get(k, False)),
    "Optional[datetime]": lambda d, k, default: parse_time(d.get(k)),
    "list[str]": lambda d, k, default: _strings(d.get(k)),
    "list[int]": lambda d, k, default: _ints(d.get(k)),
    "Optional[Problem]": lambda d, k, default: _problem(d.get(k)),
    "Any": lambda d, k, default: d.get(k),
}

M = TypeVar("M")

#: Every _Model by its name, for the fields that hold one or a list of them.
_MODELS: dict[str, Any] = {}


def _nested(kind: str, v: Any) -> Any:
    """A member holding objects of a model: ``Name`` (an absent one reads as {}), ``Optional[Name]`` or ``list[Name]``."""
    if kind.startswith("list["):
        model = _MODELS[kind[5:-1]]
        return [model.from_dict(x) for x in v if isinstance(x, Mapping)] if isinstance(v, list) else []
    if kind.startswith("Optional["):
        return _MODELS[kind[9:-1]].from_dict(v) if isinstance(v, Mapping) else None
    return _MODELS[kind].from_dict(_map(v))


def _read(cls: type[M], d: Mapping[str, Any], **given: Any) -> M:
    """Build the dataclass cls from its JSON object d.

    Each field is read from the member of its name (``from_`` from
    ``from``: a trailing underscore only keeps a Python keyword out), as
    its declared type says: a str or int that is missing or of another
    type gets the field's default (else "" or 0), an Optional one None, a
    bool False, a list [] (items of another type left out), a model the
    model read from the member. ``given`` supplies the fields that take
    more (another member, another default); a private field keeps its
    default.
    """
    kw = dict(given)
    for f in fields(cast(Any, cls)):
        if f.name in kw or f.name.startswith("_"):
            continue
        kind, key = str(f.type).replace('"', "").replace("'", ""), f.name.rstrip("_")
        reader = _READERS.get(kind)
        kw[f.name] = reader(d, key, f.default) if reader else _nested(kind, d.get(key))
    return cls(**kw)


class _Model:
    """A JSON object of the API (openapi.yaml), read by from_dict as its fields' types say."""

    def __init_subclass__(cls, **kw: Any) -> None:
        super().__init_subclass__(**kw)
        _MODELS[cls.__name__] = cls

    @classmethod
    def from_dict(cls: type[M], d: Mapping[str, Any]) -> M:
        """Build the object from its JSON object."""
        return _read(cls, d)


@dataclass
class File(_Model):
    """A stored file's metadata. ``url`` and ``id`` survive replaces; ``etag`` names the content."""

    id: str
    path: str
    size_bytes: int
    content_type: str
    #: Lowercase hex SHA-256 of the whole content.
    sha256: str
    #: The quoted SHA-256, as the ETag header carries it.
    etag: str
    version: int
    url: str
    #: Attribution of the request that created the file (what list filters match).
    agent_id: Optional[str]
    run_id: Optional[str]
    #: Attribution of the latest write.
    last_agent_id: Optional[str]
    last_run_id: Optional[str]
    created_at: Optional[datetime]
    updated_at: Optional[datetime]
    deleted_at: Optional[datetime]
    purge_after: Optional[datetime]
    blocked: bool
    #: When the file stops being served and counts as deleted; None: never.
    expires_at: Optional[datetime] = None
    #: The file and version a fork copied this file from; None: not a fork's copy.
    forked_from: Optional["FileVersionRef"] = None
    object: str = "file"
    #: POSIX permission bits (0o644 unless a write set them).
    mode: int = 0o644
    #: The client's modification time (updated_at unless a write set it).
    mtime: Optional[datetime] = None
    #: "file", "symlink" (the content is the target) or "directory" (a marker keeping an empty folder).
    kind: str = "file"


@dataclass
class FileVersionRef(_Model):
    """One version of a file."""

    file_id: str
    version: int


@dataclass
class Folder(_Model):
    """One page of a folder (GET /v1/files?delimiter=/): the files directly under the prefix and the folders below it."""

    files: list[File]
    #: The folders under the prefix, each the prefix, a segment and "/".
    prefixes: list[str]
    has_more: bool
    #: Pass as ``cursor`` to list_folder for the next page; None on the last.
    next_cursor: Optional[str]

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Folder":
        """Build a Folder from a FileList object answered with delimiter=/."""
        return cls(files=[File.from_dict(f) for f in d.get("data") or []],
                   prefixes=[p for p in d.get("prefixes") or [] if isinstance(p, str)],
                   has_more=bool(d.get("has_more", False)), next_cursor=_opt_s(d, "next_cursor"))


@dataclass
class UploadPart(_Model):
    """One stored part of an upload session (``upload_id`` is set on the answer to a part upload)."""

    part_number: int
    size_bytes: int
    #: Lowercase hex SHA-256 of the part as the server stored it.
    sha256: str
    upload_id: Optional[str] = None
    object: str = "upload_part"


@dataclass
class Upload(_Model):
    """A multipart upload session: ``size_bytes`` sent in ``part_count`` parts of ``part_size``."""

    id: str
    path: str
    size_bytes: int
    content_type: str
    #: "error" or "replace": what complete does when a live file holds the path.
    if_exists: str
    #: The whole file's SHA-256 declared at the start, if any.
    sha256: Optional[str]
    #: Chosen by the server: every part but the last has exactly this many bytes.
    part_size: int
    part_count: int
    #: pending, completing, completed, aborted, expired or failed.
    status: str
    #: The parts received so far: what a resume need not send again.
    parts: list[UploadPart]
    expires_at: Optional[datetime]
    #: The file the session completed into.
    file: Optional[File]
    #: The problem that failed the session (CHECKSUM_MISMATCH).
    error: Optional[Problem]
    agent_id: Optional[str]
    run_id: Optional[str]
    created_at: Optional[datetime]
    #: Seconds after it is written that the file this session makes expires; None: never.
    expires_in: Optional[int] = None
    object: str = "upload"

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Upload":
        """Build an Upload from its JSON object (``if_exists`` is "error" unless it says otherwise)."""
        return _read(cls, d, if_exists=_s(d, "if_exists", "error"))


@dataclass
class BatchCounts(_Model):
    """A batch's items by status."""

    total: int = 0
    succeeded: int = 0
    failed: int = 0
    pending: int = 0
    #: Items cancel_batch stopped before they ran.
    canceled: int = 0


@dataclass
class BatchItem(_Model):
    """One operation of a batch and its outcome."""

    #: The operation's position in the request, from 0.
    index: int
    op: str
    #: A put's or copy's target; None for delete and restore.
    path: Optional[str]
    #: pending, succeeded, failed or canceled.
    status: str
    #: The put's idempotency_key already held this outcome.
    replayed: bool
    #: The file the item left, when it succeeded.
    file: Optional[File]
    #: The problem a standalone request would have returned, when it failed.
    error: Optional[Problem]


BATCH_TERMINAL = ("succeeded", "partially_succeeded", "failed", "canceled")


@dataclass
class Batch(_Model):
    """Many operations run in order in the background."""

    id: str
    #: queued or running until terminal: succeeded, partially_succeeded, failed or canceled.
    status: str
    counts: BatchCounts
    #: The operations and their outcomes; empty in a listing (list_batches), which counts them only.
    items: list[BatchItem]
    created_at: Optional[datetime]
    started_at: Optional[datetime]
    completed_at: Optional[datetime]
    object: str = "batch"

    @property
    def terminal(self) -> bool:
        """Whether the batch has ended: every item has run, or it was canceled and nothing runs any more."""
        return self.status in BATCH_TERMINAL

    def failed_items(self) -> list[BatchItem]:
        """The items that failed, in order."""
        return [it for it in self.items if it.status == "failed"]

    def succeeded_items(self) -> list[BatchItem]:
        """The items that succeeded, in order."""
        return [it for it in self.items if it.status == "succeeded"]


@dataclass
class BatchOp:
    """One operation of a batch; build it with BatchOp.put/delete/restore/copy."""

    op: str
    path: Optional[str] = None
    file_id: Optional[str] = None
    content: Optional[str] = None
    encoding: Optional[str] = None
    content_type: Optional[str] = None
    if_exists: Optional[str] = None
    idempotency_key: Optional[str] = None
    #: A put's file expires this many seconds after the item runs (60 to 31536000).
    expires_in: Optional[int] = None

    @classmethod
    def put(
        cls,
        path: str,
        content: Union[bytes, str],
        *,
        content_type: Optional[str] = None,
        if_exists: Optional[str] = None,
        idempotency_key: Optional[str] = None,
        expires_in: Union[int, float, timedelta, None] = None,
    ) -> "BatchOp":
        """Store content at path: text as utf8, bytes as text when valid UTF-8, else base64.

        ``idempotency_key`` is the item's own key, shared with standalone
        uploads: the same put under it gives back the stored file.
        ``expires_in`` (seconds or a timedelta) makes the file expire that long
        after the item runs.
        """
        if isinstance(content, str):
            text, enc = content, None
        else:
            try:
                text, enc = bytes(content).decode("utf-8"), None
            except UnicodeDecodeError:
                text, enc = base64.b64encode(bytes(content)).decode("ascii"), "base64"
        return cls(op="put", path=path, content=text, encoding=enc, content_type=content_type,
                   if_exists=if_exists, idempotency_key=idempotency_key,
                   expires_in=seconds_of("expires_in", expires_in))

    @classmethod
    def delete(cls, file_id: str) -> "BatchOp":
        """Soft-delete the file."""
        return cls(op="delete", file_id=file_id)

    @classmethod
    def restore(cls, file_id: str) -> "BatchOp":
        """Restore the deleted file."""
        return cls(op="restore", file_id=file_id)

    @classmethod
    def copy(cls, file_id: str, path: str, *, if_exists: Optional[str] = None) -> "BatchOp":
        """Write the live file's content and content type at path."""
        return cls(op="copy", file_id=file_id, path=path, if_exists=if_exists)

    def to_dict(self) -> dict[str, Any]:
        """The operation as JSON; a put always carries content, an empty one included."""
        out: dict[str, Any] = {"op": self.op}
        for k in ("path", "file_id", "content", "encoding", "content_type", "if_exists", "idempotency_key",
                  "expires_in"):
            v = getattr(self, k)
            if v is not None:
                out[k] = v
        if self.op == "put":
            out.setdefault("content", "")
        return out


@dataclass
class OperationResource(_Model):
    """The resource an operation produced or acted on."""

    object: str
    id: str


@dataclass
class Operation(_Model):
    """What an Idempotency-Key holds for this subject: the request and, once completed, its answer."""

    idempotency_key: str
    #: in_progress, completed or abandoned (the claim's owner died with
    #: nothing recorded: nothing happened, and the same key may be sent
    #: again).
    status: str
    method: str
    #: The server's route template, e.g. "/v1/files/:id/restore".
    route: str
    response_status: Optional[int]
    #: The recorded response body (parsed JSON), None while in progress.
    response: Any
    resource: Optional[OperationResource]
    created_at: Optional[datetime]
    completed_at: Optional[datetime]
    expires_at: Optional[datetime]
    #: Members of ``response`` shown None because they hold a secret (a
    #: link's ``url``): only the request itself, sent again with the same
    #: key by the same token, answers them.
    redacted: list[str] = field(default_factory=list)
    object: str = "operation"

    @property
    def completed(self) -> bool:
        """Whether the operation has its recorded answer."""
        return self.status == "completed"

    def outcome(self) -> Any:
        """The recorded answer: a File, Upload, UploadPart, Batch or Link (else the JSON).

        A recorded error is raised as its Problem; an operation still in
        progress raises RuntimeError.
        """
        if not self.completed or self.response_status is None:
            raise RuntimeError(f"operation {self.idempotency_key!r} is still in progress")
        body = self.response if isinstance(self.response, Mapping) else {}
        if self.response_status >= 400:
            raise problem_from_dict(self.response_status, body)
        parser = _PARSERS.get(_s(body, "object"))
        return parser(body) if parser else self.response

    def recorded_body(self) -> bytes:
        """The recorded response body, encoded again as JSON."""
        return json.dumps(self.response).encode("utf-8")


@dataclass
class FileVersion(_Model):
    """One version of a file's content: every write that changed the bytes or the content type made one."""

    file_id: str
    version: int
    size_bytes: int
    content_type: str
    #: Lowercase hex SHA-256 of this version's content.
    sha256: str
    #: The quoted SHA-256.
    etag: str
    #: Serves this version's bytes (version_content), with a token.
    url: str
    #: Attribution of the write that made this version.
    agent_id: Optional[str]
    run_id: Optional[str]
    created_at: Optional[datetime]
    #: This version is the file's content now.
    current: bool
    object: str = "file_version"


@dataclass
class Link(_Model):
    """A share link: a URL that serves one file's content without a token until it expires or is revoked."""

    id: str
    file_id: str
    #: The version the link serves; None: always the file's current content.
    version: Optional[int]
    #: PUBLIC_URL/s/{secret}: shown once, in the answer to create_link (and a replay of it); None in listings.
    url: Optional[str]
    expires_at: Optional[datetime]
    revoked_at: Optional[datetime]
    created_at: Optional[datetime]
    object: str = "link"


@dataclass
class Token(_Model):
    """A bearer token and its grant (what it may do, where, until when), as it and its ancestors see it."""

    id: str
    #: The bearer token itself: only in the answer to create_token; None everywhere else.
    token: Optional[str]
    name: str
    #: Of read, write, share, delegate.
    scopes: list[str]
    #: The folders it sees and touches; empty: every path.
    prefixes: list[str]
    run_id: Optional[str]
    agent_id: Optional[str]
    expires_at: Optional[datetime]
    #: Bytes it may write in all; None: no limit.
    max_bytes: Optional[int]
    bytes_written: int
    #: The token that made it; None for one an operator made.
    parent_id: Optional[str]
    created_at: Optional[datetime]
    revoked_at: Optional[datetime]
    object: str = "token"


@dataclass
class Webhook(_Model):
    """A receiver of the subject's matching events, signed the Standard Webhooks way."""

    id: str
    url: str
    #: The event types delivered; empty: every type.
    types: list[str]
    prefix: str
    run_id: Optional[str]
    description: str
    #: The signing secret (``whsec_…``): only in the answers that made or rotated it.
    secret: Optional[str]
    #: active or disabled.
    status: str
    #: Why a disabled webhook stopped; None while active.
    disabled_reason: Optional[str]
    #: The event cursor of the last event the receiver acknowledged.
    cursor: str
    failed_attempts: int
    next_attempt_at: Optional[datetime]
    created_at: Optional[datetime]
    updated_at: Optional[datetime]
    object: str = "webhook"


@dataclass
class WebhookDelivery(_Model):
    """One attempt to deliver one event to a webhook."""

    id: str
    event_id: str
    attempt: int
    #: succeeded or failed.
    status: str
    #: The receiver's HTTP status; None when no answer came.
    status_code: Optional[int]
    error: Optional[str]
    latency_ms: int
    at: Optional[datetime]
    object: str = "webhook_delivery"


@dataclass
class ChangeSide(_Model):
    """A file's content at one point of a diff."""

    version: int
    sha256: str
    size_bytes: int


@dataclass
class Change(_Model):
    """One file that differs between the two points of a diff."""

    #: The path at ``to`` (at ``from`` for a deleted file).
    path: str
    #: added, modified, deleted or moved.
    change: str
    file_id: str
    #: The path at ``from`` of a moved file; None otherwise.
    previous_path: Optional[str]
    #: The file at ``from``; None when it was not live then.
    from_: Optional[ChangeSide]
    #: The file at ``to``; None when it was not live then.
    to: Optional[ChangeSide]


@dataclass
class RunRevertStep(_Model):
    """One file of a run revert's plan: what the file becomes."""

    file_id: str
    #: Where the file is put back (for a delete, where the run made it).
    path: str
    #: "delete" (the run created or restored it) or "put_back" (its path, content and life from before the run).
    action: str
    #: The version whose content it gets back; None when the run did not change its content.
    version: Optional[int]


@dataclass
class RunRevertPlan(_Model):
    """What reverting a run would do, changing nothing (plan_revert_run)."""

    run_id: str
    #: The files the revert would undo, newest change first.
    items: list[RunRevertStep]
    object: str = "run_revert_plan"


@dataclass
class RestorePlan(_Model):
    """What a restore would do, changing nothing (restore with dry_run)."""

    prefix: str
    #: The point, as an event cursor.
    to: str
    #: The changes since the point the restore would undo, in the order its items would run.
    items: list[Change]
    object: str = "restore_plan"


@dataclass
class Checkpoint(_Model):
    """A named point of the subject's history: a position of the event feed, not a copy."""

    id: str
    #: Unique per subject; None for an unnamed checkpoint.
    name: Optional[str]
    #: The path prefix whose versions it keeps ('' for all).
    prefix: str
    note: str
    #: Its position as an event cursor: a point for as_of, diff and restore.
    cursor: str
    agent_id: Optional[str]
    run_id: Optional[str]
    created_at: Optional[datetime]
    object: str = "checkpoint"


@dataclass
class Fork(_Model):
    """A copy-on-write copy of the files under one folder, merged back with merge()."""

    id: str
    #: The folder forked (and merged into).
    from_: str
    #: The folder the copies went to.
    to: str
    #: The point forked, then that of the last merge, as an event cursor.
    base: str
    #: How many files the fork copied.
    files: int
    agent_id: Optional[str]
    run_id: Optional[str]
    created_at: Optional[datetime]
    merged_at: Optional[datetime]
    object: str = "fork"


@dataclass
class MergeSide(_Model):
    """One side of a merge at a path: a file's version and content."""

    file_id: str
    version: int
    sha256: str


@dataclass
class MergeConflict(_Model):
    """A path changed on both sides of a merge to different bytes; a side with no file there is None."""

    #: The target's path.
    path: str
    base: Optional[MergeSide]
    fork: Optional[MergeSide]
    target: Optional[MergeSide]
    #: The side the merge kept ("fork" or "target"); None when nothing was merged.
    resolution: Optional[str]


@dataclass
class Merge(_Model):
    """A merge of a fork back into its source (with dry_run, what it would do)."""

    fork_id: str
    #: The fork's base after the merge, as an event cursor.
    base: str
    dry_run: bool
    #: The changes applied to the target, as a diff lists them.
    applied: list[Change]
    #: The paths changed on both sides, with the side kept.
    conflicts: list[MergeConflict]
    object: str = "merge"


@dataclass
class Event(_Model):
    """One effect on a file, committed in the same transaction as the effect: the feed shows what happened, once."""

    id: str
    #: file.created, file.replaced, file.deleted, file.restored, file.moved, file.reverted, file.expired or file.purged.
    type: str
    file_id: str
    path: str
    #: The path a move left; None for other events.
    previous_path: Optional[str]
    #: The content the event left; None for events that leave none (a delete, a purge).
    version: Optional[int]
    size_bytes: Optional[int]
    sha256: Optional[str]
    #: Attribution of the request that caused the event.
    agent_id: Optional[str]
    run_id: Optional[str]
    idempotency_key: Optional[str]
    request_id: Optional[str]
    #: The batch whose item caused the event, if any.
    batch_id: Optional[str]
    at: Optional[datetime]
    #: The checkpoint of a checkpoint.created or checkpoint.deleted event (file_id is then empty); None for file events.
    checkpoint_id: Optional[str]
    #: The fork of an event a fork or a merge wrote; None for every other event.
    fork_id: Optional[str] = None
    #: "fork" or "merge" for the events they wrote; None for every other write.
    origin: Optional[str] = None
    object: str = "event"


@dataclass
class EventPage(_Model):
    """One page of events, oldest first."""

    data: list[Event]
    has_more: bool
    #: Always set: ``after`` for the next page, or for the next poll when data was empty.
    next_cursor: str


@dataclass
class RunCounts(_Model):
    """A run's effects by kind."""

    created: int = 0
    replaced: int = 0
    deleted: int = 0
    restored: int = 0
    moved: int = 0
    reverted: int = 0


@dataclass
class Run(_Model):
    """What one run (one X-Run-ID) did, from its events."""

    run_id: str
    #: The X-Agent-IDs its requests carried.
    agent_ids: list[str]
    first_at: Optional[datetime]
    last_at: Optional[datetime]
    counts: RunCounts
    #: The sizes of the versions its creates and replaces made.
    bytes_written: int
    #: The files it created or last wrote that are live now.
    live_files: int
    object: str = "run"


@dataclass
class Next(_Model):
    """The next safe step of a run's recovery: a sentence, and the exact request to send."""

    text: str
    method: str
    #: The request's path and query, below the API's base URL.
    path: str
    #: The Idempotency-Key to send it with, if any.
    idempotency_key: Optional[str] = None
    #: Wait this long before sending it, if set.
    after_seconds: Optional[int] = None


@dataclass
class RecoveryConfirmed(_Model):
    """What a run's events confirm happened."""

    events: int
    #: The event cursor at the run's last event, None when it has none.
    last_event_cursor: Optional[str]
    live_files: int
    counts: RunCounts


@dataclass
class RecoveryOperation(_Model):
    """One key a request of the run claimed: completed, in_progress or abandoned, and its next step."""

    idempotency_key: str
    method: str
    route: str
    #: completed, in_progress or abandoned (nothing happened: send it again with the key).
    status: str
    resource: Optional[OperationResource]
    response_status: Optional[int]
    at: Optional[datetime]
    next: Next


@dataclass
class RecoveryUpload(_Model):
    """An upload session of the run still open, with the parts it still needs."""

    id: str
    path: str
    status: str
    size_bytes: int
    if_exists: str
    parts_received: list[int]
    part_count: int
    missing_parts: list[int]
    next: Next


@dataclass
class RecoveryBatch(_Model):
    """A batch of the run not yet terminal."""

    id: str
    status: str
    counts: BatchCounts
    next: Next


@dataclass
class RecoveryInFlight(_Model):
    """A run's upload sessions and batches not yet ended."""

    uploads: list[RecoveryUpload]
    batches: list[RecoveryBatch]


@dataclass
class RunRecovery(_Model):
    """What a run left behind, true at ``as_of``, with the next safe request for each thing it left open."""

    run_id: str
    #: The event cursor everything here holds at (follow events after it).
    as_of: str
    confirmed: RecoveryConfirmed
    operations: list[RecoveryOperation]
    in_flight: RecoveryInFlight
    #: The requests still to send, in order.
    next_actions: list[Next]
    #: Kept keys claimed before the server recorded runs on keys (none of them listed).
    predates_run_record: int
    has_more: bool
    next_cursor: Optional[str]
    object: str = "run_recovery"


@dataclass
class SearchMatch(_Model):
    """One matching line of a file: 1-based line, 1-based byte column of the first match, context around it."""

    file_id: str
    path: str
    #: The file's current version, whose content was searched.
    version: int
    line: int
    column: int
    #: The line without its newline, cut at 4 KiB (``truncated`` says so).
    text: str
    truncated: bool
    before: list[str]
    after: list[str]


@dataclass
class SearchSkipped(_Model):
    """The files in a search's scope that are not searched."""

    #: Not valid UTF-8, or holding a NUL.
    binary: int = 0
    #: Larger than the server's AGENTFS_SEARCH_MAX_FILE_BYTES.
    too_large: int = 0


@dataclass
class SearchResults(_Model):
    """One page of a content search, by path then line. Iterating it follows ``next_cursor`` through every page's matches."""

    data: list[SearchMatch]
    has_more: bool
    next_cursor: Optional[str]
    #: Files with a match and text files read, over the pages so far (the search's totals on the last page).
    files_matched: int
    files_searched: int
    files_skipped: SearchSkipped
    #: False while files written before the search index existed are still being indexed.
    index_complete: bool
    object: str = "search_results"
    _fetch: Optional[Callable[[str], "SearchResults"]] = field(default=None, repr=False, compare=False)

    def next_page(self) -> Optional["SearchResults"]:
        """The next page, or None after the last."""
        if not self.has_more or self.next_cursor is None or self._fetch is None:
            return None
        return self._fetch(self.next_cursor)

    def iter_pages(self) -> Iterator["SearchResults"]:
        """This page and every one after it."""
        page: Optional[SearchResults] = self
        while page is not None:
            yield page
            page = page.next_page()

    def __iter__(self) -> Iterator[SearchMatch]:
        for page in self.iter_pages():
            yield from page.data


@dataclass
class AsyncSearchResults(_Model):
    """One page of a content search for AsyncClient; ``async for`` follows ``next_cursor`` through every match."""

    data: list[SearchMatch]
    has_more: bool
    next_cursor: Optional[str]
    files_matched: int
    files_searched: int
    files_skipped: SearchSkipped
    index_complete: bool
    object: str = "search_results"
    _fetch: Optional[Callable[[str], Any]] = field(default=None, repr=False, compare=False)

    async def next_page(self) -> Optional["AsyncSearchResults"]:
        """The next page, or None after the last."""
        if not self.has_more or self.next_cursor is None or self._fetch is None:
            return None
        page: AsyncSearchResults = await self._fetch(self.next_cursor)
        return page

    async def iter_pages(self) -> Any:
        """This page and every one after it (an async iterator)."""
        page: Optional[AsyncSearchResults] = self
        while page is not None:
            yield page
            page = await page.next_page()

    async def __aiter__(self) -> Any:
        async for page in self.iter_pages():
            for item in page.data:
                yield item


_PARSERS: dict[str, Callable[[Mapping[str, Any]], Any]] = {
    "file": File.from_dict,
    "upload": Upload.from_dict,
    "upload_part": UploadPart.from_dict,
    "batch": Batch.from_dict,
    "link": Link.from_dict,
}


@dataclass
class Page(Generic[T]):
    """One page of a list, newest first. Iterating it follows ``next_cursor`` through every page."""

    data: list[T]
    has_more: bool
    #: The cursor of the next page; None on the last.
    next_cursor: Optional[str]
    _fetch: Optional[Callable[[str], "Page[T]"]] = field(default=None, repr=False, compare=False)

    def next_page(self) -> Optional["Page[T]"]:
        """The next page, or None after the last."""
        if not self.has_more or self.next_cursor is None or self._fetch is None:
            return None
        return self._fetch(self.next_cursor)

    def iter_pages(self) -> Iterator["Page[T]"]:
        """This page and every one after it."""
        page: Optional[Page[T]] = self
        while page is not None:
            yield page
            page = page.next_page()

    def __iter__(self) -> Iterator[T]:
        for page in self.iter_pages():
            yield from page.data


@dataclass
class AsyncPage(Generic[T]):
    """One page of a list for AsyncClient; ``async for`` follows ``next_cursor`` through every page."""

    data: list[T]
    has_more: bool
    next_cursor: Optional[str]
    _fetch: Optional[Callable[[str], Any]] = field(default=None, repr=False, compare=False)

    async def next_page(self) -> Optional["AsyncPage[T]"]:
        """The next page, or None after the last."""
        if not self.has_more or self.next_cursor is None or self._fetch is None:
            return None
        page: AsyncPage[T] = await self._fetch(self.next_cursor)
        return page

    async def iter_pages(self) -> Any:
        """This page and every one after it (an async iterator)."""
        page: Optional[AsyncPage[T]] = self
        while page is not None:
            yield page
            page = await page.next_page()

    async def __aiter__(self) -> Any:
        async for page in self.iter_pages():
            for item in page.data:
                yield item


@dataclass
class Protocol(_Model):
    """What the server guarantees: its idempotency rules, retry policy and limits."""

    api_version: str
    idempotency: dict[str, Any]
    retry: dict[str, Any]
    limits: dict[str, Any]
    #: The grant model: scopes, folder prefixes, pins, where child tokens are made.
    grants: dict[str, Any]
    #: The document as the server sent it, including members this client does not know.
    raw: dict[str, Any]
    #: Where and how the server serves its MCP tools; None when it does not.
    mcp: Optional[dict[str, Any]] = None
    #: Where an OAuth client learns how to get an access token: ``resource_metadata``
    #: (the RFC 9728 metadata's URL) and ``authorization_servers``.
    oauth: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Protocol":
        """Build a Protocol from its JSON object."""
        m = d.get("mcp")
        o = d.get("oauth")
        return cls(
            api_version=_s(d, "api_version"),
            idempotency=dict(_map(d.get("idempotency"))),
            retry=dict(_map(d.get("retry"))),
            limits=dict(_map(d.get("limits"))),
            raw=dict(d),
            mcp=dict(m) if isinstance(m, Mapping) else None,
            oauth=dict(o) if isinstance(o, Mapping) else {},
            grants=dict(_map(d.get("grants"))),
        )
