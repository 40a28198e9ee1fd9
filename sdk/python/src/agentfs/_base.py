"""What the sync and the async client share: configuration, the requests of every route, and reading their answers.

The clients themselves only send, read, sleep and stream.
"""

from __future__ import annotations

import base64
import binascii
import copy
import email.message
import hashlib
import json
import os
import re
import tempfile
import time
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from email.utils import parsedate_to_datetime
from typing import Any, BinaryIO, Callable, Iterator, Mapping, Optional, Sequence, TypeVar, Union, cast
from urllib.parse import urlsplit

import httpx

from ._compat import read_early_responses
from ._errors import AgentFSError, APIConnectionError, Problem, RedirectError, problem_from_response
from ._events import FollowState
from ._models import BatchOp, File, Link, Token, Upload, Webhook, WebhookDelivery, seconds_of
from ._request import (
    NOT_GIVEN,
    BytesBody,
    Request,
    check_key,
    check_tag,
    escape,
    make_body,
    new_idempotency_key,
    route_request,
)
from ._retry import (
    DEFAULT_RETRY,
    Poll,
    Send,
    Step,
    ROUTE_ABORT_UPLOAD,
    ROUTE_BATCH,
    ROUTE_CANCEL_BATCH,
    ROUTE_COMPLETE,
    ROUTE_CREATE_BATCH,
    ROUTE_CREATE_LINK,
    ROUTE_CREATE_UPLOAD,
    ROUTE_DELETE_FILE,
    ROUTE_EVENTS,
    ROUTE_FILE,
    ROUTE_FILE_CONTENT,
    ROUTE_LINKS,
    ROUTE_LIST_BATCHES,
    ROUTE_LIST_FILES,
    ROUTE_LIST_UPLOADS,
    ROUTE_LIST_VERSIONS,
    ROUTE_MOVE,
    ROUTE_OPERATION,
    ROUTE_PATCH_FILE,
    ROUTE_PROTOCOL,
    ROUTE_PUT_FILE,
    ROUTE_RESTORE_FILE,
    ROUTE_REVERT,
    ROUTE_REVERT_RUN,
    ROUTE_CREATE_TOKEN,
    ROUTE_TOKENS,
    ROUTE_TOKEN,
    ROUTE_REVOKE_TOKEN,
    ROUTE_CREATE_CHECKPOINT,
    ROUTE_LIST_CHECKPOINTS,
    ROUTE_CHECKPOINT,
    ROUTE_DELETE_CHECKPOINT,
    ROUTE_DIFF,
    ROUTE_RESTORE,
    ROUTE_CREATE_WEBHOOK,
    ROUTE_WEBHOOKS,
    ROUTE_WEBHOOK,
    ROUTE_UPDATE_WEBHOOK,
    ROUTE_DELETE_WEBHOOK,
    ROUTE_ROTATE_WEBHOOK,
    ROUTE_REPLAY_WEBHOOK,
    ROUTE_WEBHOOK_DELIVERIES,
    ROUTE_CREATE_FORK,
    ROUTE_LIST_FORKS,
    ROUTE_FORK,
    ROUTE_DELETE_FORK,
    ROUTE_MERGE,
    ROUTE_REVOKE_LINK,
    ROUTE_LIST_RUNS,
    ROUTE_RUN,
    ROUTE_SEARCH,
    ROUTE_RUN_ARCHIVE,
    ROUTE_RUN_RECOVERY,
    ROUTE_UPLOAD,
    ROUTE_UPLOAD_PART,
    ROUTE_VERSION,
    ROUTE_VERSION_CONTENT,
    RandomSource,
    RetryPolicy,
    default_random,
    parse_retry_after,
)
from ._uploads import regular_file_size
from ._version import __version__

# Old httpcore releases drop the answer a server sends before reading the whole body.
read_early_responses()

#: Default timeouts: a slow answer is not a dead one, but a dead connection is noticed.
DEFAULT_TIMEOUT = httpx.Timeout(120.0, connect=10.0)

#: The longest wait= the server accepts for POST /v1/batch, in seconds.
MAX_BATCH_WAIT = 30

#: The longest wait= the server accepts for GET /v1/events, in seconds.
MAX_EVENT_WAIT = 30

#: The most of an error body that is read.
MAX_PROBLEM_BYTES = 64 << 10

#: Polls of something the server finishes in the background start this far apart...
POLL_FIRST = 0.1
#: ...and slow down to this.
POLL_MAX = 2.0

#: The ``after`` that starts at the current end of the event feed: exactly what commits from
#: then on.
EVENTS_NOW = "now"

#: Archive formats of run_archive.
ARCHIVE_FORMATS = ("zip", "tar")

#: Told the bytes of an archive received so far, and None for the total, which is not known up front.
ArchiveProgress = Callable[[int, Optional[int]], Any]


def archive_format(format: Optional[str], destination: Any) -> str:
    """The format asked for, or the one a destination path's name implies (.tar), else zip."""
    if format is not None:
        if format not in ARCHIVE_FORMATS:
            raise ValueError(f"run_archive: format {format!r}: want zip or tar")
        return format
    if not hasattr(destination, "write") and os.fspath(destination).lower().endswith(".tar"):
        return "tar"
    return "zip"


def problem_of(response: httpx.Response, body: bytes) -> Problem:
    """The Problem of an error response, from the first MAX_PROBLEM_BYTES of its body (all that is read)."""
    return problem_from_response(response.status_code, response.headers, body[:MAX_PROBLEM_BYTES],
                                 retry_after=parse_retry_after(response.headers.get("retry-after")))


def archive_stopped(received: int, err: BaseException) -> APIConnectionError:
    """The error of an archive cut after ``received`` bytes: the server never ends one early in silence."""
    return APIConnectionError(f"the run archive stopped after {received} bytes: {str(err) or type(err).__name__}")


_P = TypeVar("_P")


def page_of(d: Any, parse: Callable[[Mapping[str, Any]], Any], fetch: Callable[[str], Any],
            cls: Callable[..., _P]) -> _P:
    """A Page (or AsyncPage, as cls) of a keyset listing's JSON, whose next pages come from fetch(cursor)."""
    data = d.get("data") if isinstance(d, Mapping) else None
    return cls(
        data=[parse(x) for x in data or [] if isinstance(x, Mapping)],
        has_more=bool(d.get("has_more")) if isinstance(d, Mapping) else False,
        next_cursor=d.get("next_cursor") if isinstance(d, Mapping) else None,
        _fetch=fetch,
    )


def tokens_of(d: Any) -> list[Token]:
    """The tokens of a token listing (GET /v1/tokens)."""
    return [Token.from_dict(x) for x in (d.get("data") or []) if isinstance(x, dict)]


def webhooks_of(d: Any) -> list[Webhook]:
    """The webhooks of a webhook listing (GET /v1/webhooks)."""
    return [Webhook.from_dict(x) for x in (d.get("data") or []) if isinstance(x, dict)]


def deliveries_of(d: Any) -> list[WebhookDelivery]:
    """The attempts of a delivery log (GET /v1/webhooks/{id}/deliveries)."""
    return [WebhookDelivery.from_dict(x) for x in (d.get("data") or []) if isinstance(x, dict)]


def links_of(d: Any) -> list[Link]:
    """The links of a file's link listing (GET /v1/files/{id}/links)."""
    return [Link.from_dict(x) for x in (d.get("data") or []) if isinstance(x, dict)]


#: How many parts upload_file sends at once.
DEFAULT_PARALLEL = 4

#: The size from which upload_file sends a file through an upload session.
DEFAULT_SESSION_THRESHOLD = 64 << 20

_SHA256 = re.compile(r"^[0-9a-fA-F]{64}$")


def digest_of(sha256_hex: str) -> str:
    """The RFC 9530 Content-Digest of content whose SHA-256 is sha256_hex: "sha-256=:BASE64:"."""
    if not isinstance(sha256_hex, str) or not _SHA256.match(sha256_hex):
        raise ValueError(f"sha256 {sha256_hex!r} is not 64 hex digits")
    return "sha-256=:" + base64.b64encode(bytes.fromhex(sha256_hex)).decode("ascii") + ":"


def sha256_of_digest(v: Optional[str]) -> Optional[str]:
    """The sha-256 member of an RFC 9530 digest header as lowercase hex, or None."""
    for member in (v or "").split(","):
        name, _, val = member.strip().partition("=")
        if name.lower() != "sha-256" or len(val) < 2 or val[0] != ":" or val[-1] != ":":
            continue
        try:
            raw = base64.b64decode(val[1:-1], validate=True)
        except (binascii.Error, ValueError):
            continue
        if len(raw) == 32:
            return raw.hex()
    return None


def _json_body(req: Request, obj: Any) -> Request:
    req.body = BytesBody(json.dumps(obj, separators=(",", ":")).encode("utf-8"))
    req.headers["Content-Type"] = "application/json"
    return req


def _str_list(name: str, value: Sequence[str], what: str) -> list[str]:
    """A list argument of strings; a lone str (a common slip) is refused, saying what it takes."""
    if isinstance(value, str):
        raise ValueError(f"{name}: {what}")
    return list(value)


def _set_given(body: dict[str, Any], **members: Optional[str]) -> None:
    """Put in body each member given a non-empty value, in order."""
    for k, v in members.items():
        if v:
            body[k] = v


def _set(h: dict[str, str], name: str, value: Optional[str]) -> None:
    if value:
        h[name] = value


class ContentInfo:
    """What a content response said about the bytes it carries."""

    def __init__(self, response: httpx.Response, announced: Optional[httpx.Headers] = None) -> None:
        # announced: the headers of the server's 307 when the bytes came from
        # S3 through a presigned URL; they describe the content, S3's the transfer.
        h = response.headers if announced is None else announced
        #: 200 for the whole content, 206 for a range, 304 when If-None-Match matched.
        self.status: int = response.status_code
        self.headers = h
        self.content_type: Optional[str] = h.get("content-type")
        cl = response.headers.get("content-length")
        #: The bytes in this response, None if unknown.
        self.length: Optional[int] = int(cl) if cl and cl.isdigit() else None
        self.etag: Optional[str] = h.get("etag")
        #: Lowercase hex SHA-256 of the whole content (from Repr-Digest), also for a range.
        self.sha256: Optional[str] = sha256_of_digest(h.get("repr-digest"))
        #: "bytes a-b/size" for a range.
        self.content_range: Optional[str] = response.headers.get("content-range")
        #: The last segment of the file's path.
        self.filename: Optional[str] = _filename(h.get("content-disposition"))
        self.last_modified: Optional[datetime] = _http_date(h.get("last-modified"))


@contextmanager
def destination_file(destination: Union[str, "os.PathLike[str]", BinaryIO]) -> Iterator[BinaryIO]:
    """Where a download goes: a binary file as given, or for a path a temporary file beside it.

    The temporary file replaces the path when the block ends without an
    error and is removed when it raises, so a path is written whole or
    not at all.
    """
    if hasattr(destination, "write"):
        yield cast(BinaryIO, destination)
        return
    dest = os.fspath(destination)
    fd, tmp = tempfile.mkstemp(prefix=".agentfs-", dir=os.path.dirname(os.path.abspath(dest)))
    try:
        with os.fdopen(fd, "wb") as f:
            yield f
        os.replace(tmp, dest)
    except BaseException:
        os.unlink(tmp)
        raise


class Received:
    """Counts the bytes of a response as they are written out, and tells ``progress``.

    With ``verify``, the bytes of a whole content (200) are checked against
    the SHA-256 that ``info`` declared (Repr-Digest) when ``done``.
    """

    def __init__(self, info: Optional[ContentInfo] = None, *, verify: bool = False,
                 progress: Optional[ArchiveProgress] = None) -> None:
        self.n = 0
        self._want = info.sha256 if info is not None else None
        self._hash = hashlib.sha256() if verify and info is not None and info.sha256 and info.status == 200 else None
        self._progress = progress

    def add(self, chunk: bytes) -> None:
        """Count a chunk just written."""
        self.n += len(chunk)
        if self._hash is not None:
            self._hash.update(chunk)
        if self._progress is not None:
            self._progress(self.n, None)

    def done(self) -> int:
        """The bytes received; AgentFSError if they are not the ones the server declared."""
        if self._hash is not None and self._hash.hexdigest() != self._want:
            raise AgentFSError(
                f"downloaded bytes have SHA-256 {self._hash.hexdigest()}, the server declared {self._want}")
        return self.n


def _filename(v: Optional[str]) -> Optional[str]:
    if not v:
        return None
    m = email.message.Message()
    m["content-disposition"] = v
    name = m.get_filename()
    return str(name) if name is not None else None


def _http_date(v: Optional[str]) -> Optional[datetime]:
    if not v:
        return None
    try:
        return parsedate_to_datetime(v)
    except (TypeError, ValueError, IndexError):
        return None


_C = TypeVar("_C", bound="BaseClient")


class BaseClient:
    """Configuration and request building shared by Client and AsyncClient."""

    #: Whether close() closes the httpx client (one this client made itself).
    _owns_http: bool = False
    _http: Union[httpx.Client, httpx.AsyncClient]

    def __init__(
        self,
        base_url: Optional[str],
        token: Optional[str],
        *,
        agent_id: Optional[str],
        run_id: Optional[str],
        retry: Optional[RetryPolicy],
        idempotency_keys: bool,
        random: Optional[RandomSource],
    ) -> None:
        url = base_url if base_url is not None else os.environ.get("AGENTFS_URL")
        if not url:
            raise ValueError("agentfs: no base_url given and AGENTFS_URL is not set")
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.netloc or parts.query or parts.fragment:
            raise ValueError(f"agentfs: base_url {url!r}: want http(s)://host[:port][/prefix]")
        self.base_url = url.rstrip("/")
        self._token = token if token is not None else os.environ.get("AGENTFS_TOKEN")
        self.agent_id = check_tag("agent_id", agent_id)
        self.run_id = check_tag("run_id", run_id)
        if retry is not None and not isinstance(retry, RetryPolicy):
            raise TypeError("retry must be an agentfs.RetryPolicy")
        self.retry = retry or DEFAULT_RETRY
        self.idempotency_keys = idempotency_keys
        self._rng = random if random is not None else default_random()

    def with_options(
        self: _C,
        *,
        agent_id: Any = NOT_GIVEN,
        run_id: Any = NOT_GIVEN,
        retry: Any = NOT_GIVEN,
        idempotency_keys: Any = NOT_GIVEN,
    ) -> _C:
        """A client sharing this one's connections with some settings changed (None clears an id)."""
        c = copy.copy(self)
        if agent_id is not NOT_GIVEN:
            c.agent_id = check_tag("agent_id", agent_id)
        if run_id is not NOT_GIVEN:
            c.run_id = check_tag("run_id", run_id)
        if retry is not NOT_GIVEN:
            c.retry = retry or DEFAULT_RETRY
        if idempotency_keys is not NOT_GIVEN:
            c.idempotency_keys = bool(idempotency_keys)
        c._owns_http = False
        return c

    def _key_for(self, given: Optional[str]) -> Optional[str]:
        """The Idempotency-Key of one logical write: the caller's, else a new one (unless turned off)."""
        if given is not None:
            return check_key(given)
        return new_idempotency_key() if self.idempotency_keys else None

    def _write(self, route: str, path: str, idempotency_key: Optional[str], agent_id: Any, run_id: Any) -> Request:
        """A write's request, with its Idempotency-Key (see _key_for) and its per-call attribution."""
        return route_request(route, path, key=self._key_for(idempotency_key), agent_id=agent_id, run_id=run_id)

    def _url(self, req: Request) -> str:
        return self.base_url + req.path

    def _headers(self, req: Request) -> dict[str, str]:
        h = {"User-Agent": f"agentfs-python/{__version__}"}
        if self._token:
            h["Authorization"] = "Bearer " + self._token
        agent = self.agent_id if req.agent_id is NOT_GIVEN else check_tag("agent_id", req.agent_id)
        run = self.run_id if req.run_id is NOT_GIVEN else check_tag("run_id", req.run_id)
        _set(h, "X-Agent-ID", agent)
        _set(h, "X-Run-ID", run)
        _set(h, "Idempotency-Key", req.key)
        h.update(req.headers)
        return h

    def _operation_request(self, key: str) -> Request:
        return route_request(ROUTE_OPERATION, "/v1/operations/" + escape(key))

    def _step_request(self, req: Request, step: Step, stream: bool) -> tuple[Request, bool]:
        """What a Send or a Poll of retry_steps sends, and whether its answer is streamed."""
        if isinstance(step, Send):
            return req, stream
        if isinstance(step, Poll):
            return self._operation_request(step.key), False
        raise TypeError(f"unknown step {step!r}")  # pragma: no cover - retry_steps yields nothing else

    def _http_request(self, req: Request, content: Any) -> httpx.Request:
        """One attempt of req for httpx; content is what its body sends this attempt (None without a body)."""
        kwargs: dict[str, Any] = {"params": req.query or None, "headers": self._headers(req)}
        if content is not None:
            kwargs["content"] = content
        if req.timeout is not None:
            kwargs["timeout"] = req.timeout
        return self._http.build_request(req.method, self._url(req), **kwargs)

    # The requests of every route.

    def _r_protocol(self) -> Request:
        return route_request(ROUTE_PROTOCOL, "/v1/protocol")

    def _r_put_file(
        self,
        path: str,
        content: Any,
        *,
        if_exists: Optional[str],
        if_match: Optional[str],
        if_none_match: Optional[str],
        content_type: Optional[str],
        sha256: Optional[str],
        size: Optional[int],
        idempotency_key: Optional[str],
        agent_id: Any,
        run_id: Any,
        expires_in: Union[int, float, timedelta, None] = None,
        mode: Optional[int] = None,
        mtime: Optional[datetime] = None,
        kind: Optional[str] = None,
    ) -> Request:
        expires = seconds_of("expires_in", expires_in)
        req = self._write(ROUTE_PUT_FILE, "/v1/files", idempotency_key, agent_id, run_id)
        req.query["path"] = path
        if if_exists is not None:
            req.query["if_exists"] = if_exists
        if expires is not None:
            req.query["expires_in"] = str(expires)
        if mode is not None:
            req.query["mode"] = format(mode, "o")
        if mtime is not None:
            req.query["mtime"] = _rfc3339("mtime", mtime)
        if kind is not None:
            req.query["kind"] = kind
        req.replace = if_exists == "replace"
        req.body = make_body(content, size)
        h = req.headers
        _set(h, "Content-Type", content_type)
        if sha256 is not None:
            h["Content-Digest"] = digest_of(sha256)
        _set(h, "If-Match", if_match)
        _set(h, "If-None-Match", if_none_match)
        if req.body.size is not None:
            h["Content-Length"] = str(req.body.size)
        return req

    def _r_get_file(self, file_id: str) -> Request:
        return route_request(ROUTE_FILE, _file_path(file_id))

    def _r_list_files(
        self,
        *,
        run_id: Optional[str],
        agent_id: Optional[str],
        prefix: Optional[str],
        path: Optional[str],
        include_deleted: bool,
        limit: Optional[int],
        cursor: Optional[str],
        fields: Optional[Sequence[str]] = None,
    ) -> Request:
        return _page(route_request(ROUTE_LIST_FILES, "/v1/files"), limit, cursor, run_id=run_id, agent_id=agent_id,
                     prefix=prefix, path=path, include_deleted="true" if include_deleted else None,
                     fields=_fields(fields))

    def _r_list_folder(self, *, prefix: Optional[str], limit: Optional[int], cursor: Optional[str],
                       fields: Optional[Sequence[str]] = None) -> Request:
        return _page(route_request(ROUTE_LIST_FILES, "/v1/files"), limit, cursor, delimiter="/", prefix=prefix,
                     fields=_fields(fields))

    def _r_content(
        self, file_id: str, *, range: Optional[str], if_range: Optional[str], if_none_match: Optional[str]
    ) -> Request:
        return _conditional(route_request(ROUTE_FILE_CONTENT, _file_path(file_id) + "/content"), range, if_range,
                            if_none_match)

    def _r_delete_file(
        self, file_id: str, *, if_match: Optional[str], idempotency_key: Optional[str], agent_id: Any, run_id: Any
    ) -> Request:
        req = self._write(ROUTE_DELETE_FILE, _file_path(file_id), idempotency_key, agent_id, run_id)
        _set(req.headers, "If-Match", if_match)
        return req

    def _r_restore_file(self, file_id: str, *, idempotency_key: Optional[str], agent_id: Any, run_id: Any) -> Request:
        return self._write(ROUTE_RESTORE_FILE, _file_path(file_id) + "/restore", idempotency_key, agent_id, run_id)

    def _r_create_upload(
        self,
        path: str,
        size_bytes: int,
        *,
        content_type: Optional[str],
        if_exists: Optional[str],
        sha256: Optional[str],
        idempotency_key: Optional[str],
        agent_id: Any,
        run_id: Any,
        expires_in: Union[int, float, timedelta, None] = None,
    ) -> Request:
        body: dict[str, Any] = {"path": path, "size_bytes": size_bytes}
        expires = seconds_of("expires_in", expires_in)
        if expires is not None:
            body["expires_in"] = expires
        if content_type is not None:
            body["content_type"] = content_type
        if if_exists is not None:
            body["if_exists"] = if_exists
        if sha256 is not None:
            body["sha256"] = sha256.lower()
        return _json_body(self._write(ROUTE_CREATE_UPLOAD, "/v1/uploads", idempotency_key, agent_id, run_id), body)

    def _r_get_upload(self, upload_id: str) -> Request:
        return route_request(ROUTE_UPLOAD, "/v1/uploads/" + escape(upload_id))

    def _r_upload_part(
        self,
        upload_id: str,
        part_number: int,
        content: Any,
        *,
        size: Optional[int],
        sha256: Optional[str],
        idempotency_key: Optional[str],
        agent_id: Any,
        run_id: Any,
    ) -> Request:
        if not isinstance(part_number, int) or part_number < 1:
            raise ValueError(f"part_number {part_number!r}: parts are numbered from 1")
        req = self._write(ROUTE_UPLOAD_PART, f"/v1/uploads/{escape(upload_id)}/parts/{part_number}",
                          idempotency_key, agent_id, run_id)
        req.body = make_body(content, size)
        if req.body.size is None:
            raise ValueError("upload_part: the part's size is unknown; pass size= (a part needs Content-Length)")
        req.headers["Content-Type"] = "application/octet-stream"
        req.headers["Content-Length"] = str(req.body.size)
        if sha256 is not None:
            req.headers["Content-Digest"] = digest_of(sha256)
        return req

    def _r_complete_upload(
        self,
        upload_id: str,
        *,
        if_exists: Optional[str],
        sha256: Optional[str],
        if_match: Optional[str],
        idempotency_key: Optional[str],
        agent_id: Any,
        run_id: Any,
    ) -> Request:
        req = self._write(ROUTE_COMPLETE, "/v1/uploads/" + escape(upload_id) + "/complete", idempotency_key, agent_id,
                          run_id)
        body: dict[str, Any] = {}
        if if_exists is not None:
            body["if_exists"] = if_exists
        if sha256 is not None:
            body["sha256"] = sha256.lower()
        if body:
            _json_body(req, body)
        _set(req.headers, "If-Match", if_match)
        return req

    def _r_abort_upload(
        self, upload_id: str, *, idempotency_key: Optional[str], agent_id: Any, run_id: Any
    ) -> Request:
        return self._write(ROUTE_ABORT_UPLOAD, "/v1/uploads/" + escape(upload_id), idempotency_key, agent_id, run_id)

    def _r_create_batch(
        self,
        operations: Sequence[Union[BatchOp, Mapping[str, Any]]],
        *,
        idempotency_key: Optional[str],
        wait: Optional[float],
        agent_id: Any,
        run_id: Any,
    ) -> Request:
        _check_wait("create_batch", wait, MAX_BATCH_WAIT)
        ops = [op.to_dict() if isinstance(op, BatchOp) else dict(op) for op in operations]
        req = route_request(ROUTE_CREATE_BATCH, "/v1/batch", key=_required_key(idempotency_key), agent_id=agent_id,
                            run_id=run_id)
        return _json_body(_hold(req, wait), {"operations": ops})

    def _r_get_batch(self, batch_id: str) -> Request:
        return route_request(ROUTE_BATCH, "/v1/batch/" + escape(batch_id))

    def _r_list_batches(self, *, status: Optional[str], limit: Optional[int], cursor: Optional[str]) -> Request:
        return _page(route_request(ROUTE_LIST_BATCHES, "/v1/batch"), limit, cursor, status=status)

    def _r_cancel_batch(self, batch_id: str, *, idempotency_key: Optional[str], agent_id: Any,
                        run_id: Any) -> Request:
        return self._write(ROUTE_CANCEL_BATCH, "/v1/batch/" + escape(batch_id) + "/cancel", idempotency_key, agent_id,
                           run_id)

    def _r_list_uploads(self, *, status: Optional[str], path: Optional[str], limit: Optional[int],
                        cursor: Optional[str]) -> Request:
        return _page(route_request(ROUTE_LIST_UPLOADS, "/v1/uploads"), limit, cursor, status=status, path=path)

    # File history and lifecycle.

    def _r_list_versions(self, file_id: str, *, limit: Optional[int], cursor: Optional[str]) -> Request:
        return _page(route_request(ROUTE_LIST_VERSIONS, _file_path(file_id) + "/versions"), limit, cursor)

    def _r_get_version(self, file_id: str, version: int) -> Request:
        return route_request(ROUTE_VERSION, _version_path(file_id, version))

    def _r_version_content(self, file_id: str, version: int, *, range: Optional[str], if_range: Optional[str],
                           if_none_match: Optional[str]) -> Request:
        return _conditional(route_request(ROUTE_VERSION_CONTENT, _version_path(file_id, version) + "/content"), range,
                            if_range, if_none_match)

    def _r_revert_file(self, file_id: str, version: int, *, if_match: Optional[str],
                       idempotency_key: Optional[str], agent_id: Any, run_id: Any) -> Request:
        req = self._write(ROUTE_REVERT, _file_path(file_id) + "/revert", idempotency_key, agent_id, run_id)
        _set(req.headers, "If-Match", if_match)
        return _json_body(req, {"version": _version_number(version)})

    def _r_move_file(self, file_id: str, path: str, *, if_exists: Optional[str], if_match: Optional[str],
                     idempotency_key: Optional[str], agent_id: Any, run_id: Any) -> Request:
        req = self._write(ROUTE_MOVE, _file_path(file_id) + "/move", idempotency_key, agent_id, run_id)
        _set(req.headers, "If-Match", if_match)
        return _json_body(req, {"path": path, "if_exists": if_exists or "error"})

    def _r_set_expiry(self, file_id: str, expires_at: Optional[datetime], *, if_match: Optional[str],
                      idempotency_key: Optional[str], agent_id: Any, run_id: Any) -> Request:
        if expires_at is not None:
            if not isinstance(expires_at, datetime) or expires_at.tzinfo is None:
                raise ValueError(f"set_expiry: expires_at {expires_at!r} must be a timezone-aware datetime (or None)")
            at: Optional[str] = expires_at.astimezone(timezone.utc).isoformat().replace("+00:00", "Z")
        else:
            at = None
        req = self._write(ROUTE_PATCH_FILE, _file_path(file_id), idempotency_key, agent_id, run_id)
        _set(req.headers, "If-Match", if_match)
        return _json_body(req, {"expires_at": at})

    def _r_set_metadata(self, file_id: str, *, mode: Optional[int], mtime: Optional[datetime],
                        if_match: Optional[str], idempotency_key: Optional[str], agent_id: Any,
                        run_id: Any) -> Request:
        body: dict[str, Any] = {}
        if mode is not None:
            body["mode"] = mode
        if mtime is not None:
            body["mtime"] = _rfc3339("mtime", mtime)
        if not body:
            raise ValueError("set_metadata: give mode, mtime or both")
        req = self._write(ROUTE_PATCH_FILE, _file_path(file_id), idempotency_key, agent_id, run_id)
        _set(req.headers, "If-Match", if_match)
        return _json_body(req, body)

    def _r_create_link(self, file_id: str, *, expires_in: Union[int, float, timedelta, None],
                       version: Optional[int], idempotency_key: Optional[str], agent_id: Any,
                       run_id: Any) -> Request:
        body: dict[str, Any] = {}
        expires = seconds_of("expires_in", expires_in)
        if expires is not None:
            body["expires_in"] = expires
        if version is not None:
            body["version"] = _version_number(version)
        return _json_body(self._write(ROUTE_CREATE_LINK, _file_path(file_id) + "/links", idempotency_key, agent_id,
                                      run_id), body)

    def _r_links(self, file_id: str) -> Request:
        return route_request(ROUTE_LINKS, _file_path(file_id) + "/links")

    def _r_revoke_link(self, link_id: str, *, idempotency_key: Optional[str], agent_id: Any,
                       run_id: Any) -> Request:
        return self._write(ROUTE_REVOKE_LINK, "/v1/links/" + escape(link_id), idempotency_key, agent_id, run_id)

    # Delegation: scoped child tokens.

    def _r_create_token(self, *, scopes: Sequence[str], expires_in: Union[int, float, timedelta],
                        prefixes: Optional[Sequence[str]], run_id_pin: Optional[str], agent_id_pin: Optional[str],
                        max_bytes: Optional[int], name: Optional[str], idempotency_key: Optional[str]) -> Request:
        if isinstance(scopes, str) or not scopes:
            raise ValueError("scopes: name at least one of read, write, share, delegate, as a list")
        expires = seconds_of("expires_in", expires_in)
        if expires is None:
            raise ValueError("expires_in is required")
        body: dict[str, Any] = {"scopes": list(scopes), "expires_in": expires}
        if prefixes is not None:
            body["prefixes"] = _str_list("prefixes", prefixes, "a list of folders, such as ['reports/']")
        _set_given(body, run_id=run_id_pin, agent_id=agent_id_pin, name=name)
        if max_bytes is not None:
            body["max_bytes"] = int(max_bytes)
        return _json_body(self._write(ROUTE_CREATE_TOKEN, "/v1/tokens", idempotency_key, NOT_GIVEN, NOT_GIVEN), body)

    def _r_tokens(self) -> Request:
        return route_request(ROUTE_TOKENS, "/v1/tokens")

    def _r_token(self, token_id: str) -> Request:
        return route_request(ROUTE_TOKEN, "/v1/tokens/" + escape(token_id))

    def _r_revoke_token(self, token_id: str, *, idempotency_key: Optional[str]) -> Request:
        return self._write(ROUTE_REVOKE_TOKEN, "/v1/tokens/" + escape(token_id), idempotency_key, NOT_GIVEN, NOT_GIVEN)

    # Webhooks.

    def _r_create_webhook(self, *, url: str, types: Optional[Sequence[str]], prefix: Optional[str],
                          run_id: Optional[str], description: Optional[str], idempotency_key: Optional[str]) -> Request:
        if not url:
            raise ValueError("url is required")
        body: dict[str, Any] = {"url": url}
        if types is not None:
            body["types"] = _str_list("types", types, "a list of event types, such as ['file.created']")
        _set_given(body, prefix=prefix, run_id=run_id, description=description)
        return _json_body(self._write(ROUTE_CREATE_WEBHOOK, "/v1/webhooks", idempotency_key, NOT_GIVEN, NOT_GIVEN), body)

    def _r_webhooks(self) -> Request:
        return route_request(ROUTE_WEBHOOKS, "/v1/webhooks", query={"limit": "1000"})

    def _r_webhook(self, webhook_id: str) -> Request:
        return route_request(ROUTE_WEBHOOK, "/v1/webhooks/" + escape(webhook_id))

    def _r_update_webhook(self, webhook_id: str, *, url: Optional[str], types: Optional[Sequence[str]],
                          status: Optional[str], idempotency_key: Optional[str]) -> Request:
        body: dict[str, Any] = {}
        if url is not None:
            body["url"] = url
        if types is not None:
            body["types"] = list(types)
        if status is not None:
            body["status"] = status
        if not body:
            raise ValueError("name at least one of url, types, status")
        path = "/v1/webhooks/" + escape(webhook_id)
        return _json_body(self._write(ROUTE_UPDATE_WEBHOOK, path, idempotency_key, NOT_GIVEN, NOT_GIVEN), body)

    def _r_delete_webhook(self, webhook_id: str, *, idempotency_key: Optional[str]) -> Request:
        return self._write(ROUTE_DELETE_WEBHOOK, "/v1/webhooks/" + escape(webhook_id), idempotency_key, NOT_GIVEN, NOT_GIVEN)

    def _r_rotate_webhook(self, webhook_id: str, *, idempotency_key: Optional[str]) -> Request:
        path = "/v1/webhooks/" + escape(webhook_id) + "/rotate-secret"
        return self._write(ROUTE_ROTATE_WEBHOOK, path, idempotency_key, NOT_GIVEN, NOT_GIVEN)

    def _r_replay_webhook(self, webhook_id: str, after: str, *, idempotency_key: Optional[str]) -> Request:
        path = "/v1/webhooks/" + escape(webhook_id) + "/replay"
        return _json_body(self._write(ROUTE_REPLAY_WEBHOOK, path, idempotency_key, NOT_GIVEN, NOT_GIVEN), {"after": after})

    def _r_webhook_deliveries(self, webhook_id: str, *, limit: Optional[int]) -> Request:
        query = {"limit": str(limit)} if limit else {}
        return route_request(ROUTE_WEBHOOK_DELIVERIES, "/v1/webhooks/" + escape(webhook_id) + "/deliveries", query=query)

    # The run ledger.

    def _r_events(
        self,
        *,
        after: Optional[str],
        run_id: Optional[str],
        agent_id: Optional[str],
        file_id: Optional[str],
        prefix: Optional[str],
        types: Union[str, Sequence[str], None],
        limit: Optional[int],
        wait: Optional[float],
    ) -> Request:
        if isinstance(types, str):
            types = [types]
        req = _page(route_request(ROUTE_EVENTS, "/v1/events"), limit, None, after=after, run_id=run_id,
                    agent_id=agent_id, file_id=file_id, prefix=prefix, type=",".join(types) if types else None)
        _check_wait("events", wait, MAX_EVENT_WAIT)
        return _hold(req, wait)

    def _follow_state(self, *, after: Optional[str], wait: float, **filters: Any) -> FollowState:
        """What follow_events follows: its polls of the event feed, checked now rather than at the first poll.

        filters are the other keyword arguments of _r_events (run_id, agent_id, file_id, prefix, types, limit).
        """
        if not 1 <= wait <= MAX_EVENT_WAIT:
            raise ValueError(f"follow_events: wait {wait!r} is outside 1 to {MAX_EVENT_WAIT} seconds")

        def poll(cursor: Optional[str]) -> Request:
            return self._r_events(after=cursor, wait=wait, **filters)

        poll(after)
        return FollowState(poll, after, self.retry, self._rng)

    def _r_search(self, pattern: str, *, literal: bool, ignore_case: bool, prefix: Optional[str], glob: Optional[str],
                  run_id: Optional[str], context: Optional[int], limit: Optional[int], cursor: Optional[str]) -> Request:
        req = _page(route_request(ROUTE_SEARCH, "/v1/search"), limit, cursor, prefix=prefix, glob=glob, run_id=run_id,
                    literal="true" if literal else None, ignore_case="true" if ignore_case else None,
                    context=None if context is None else str(context))
        req.query["q"] = pattern
        return req

    def _r_run(self, run_id: str) -> Request:
        return route_request(ROUTE_RUN, _run_path(run_id))

    def _r_list_runs(self, *, limit: Optional[int], cursor: Optional[str]) -> Request:
        return _page(route_request(ROUTE_LIST_RUNS, "/v1/runs"), limit, cursor)

    def _r_plan_revert_run(self, run_id: str, *, force: bool) -> Request:
        req = route_request(ROUTE_REVERT_RUN, _run_path(run_id) + "/revert")
        return _json_body(req, {"force": bool(force), "dry_run": True})

    def _r_run_recovery(self, run_id: str, limit: Optional[int], cursor: Optional[str]) -> Request:
        return _page(route_request(ROUTE_RUN_RECOVERY, _run_path(run_id) + "/recovery"), limit, cursor)

    def _r_run_archive(self, run_id: str, format: str) -> Request:
        if format not in ARCHIVE_FORMATS:
            raise ValueError(f"run_archive: format {format!r}: want zip or tar")
        req = route_request(ROUTE_RUN_ARCHIVE, _run_path(run_id) + "/archive")
        req.query["format"] = format
        return req

    def _r_revert_run(self, run_id: str, *, force: bool, idempotency_key: Optional[str], agent_id: Any,
                      run_id_header: Any) -> Request:
        req = route_request(ROUTE_REVERT_RUN, _run_path(run_id) + "/revert", key=_required_key(idempotency_key),
                            agent_id=agent_id, run_id=run_id_header)
        return _json_body(req, {"force": bool(force)})

    # Points in time.

    def _r_create_checkpoint(self, *, name: Optional[str], prefix: Optional[str], note: Optional[str],
                             idempotency_key: Optional[str]) -> Request:
        req = self._write(ROUTE_CREATE_CHECKPOINT, "/v1/checkpoints", idempotency_key, NOT_GIVEN, NOT_GIVEN)
        body = {k: v for k, v in {"name": name, "prefix": prefix, "note": note}.items() if v is not None}
        return _json_body(req, body)

    def _r_list_checkpoints(self, *, prefix: Optional[str], limit: Optional[int], cursor: Optional[str]) -> Request:
        return _page(route_request(ROUTE_LIST_CHECKPOINTS, "/v1/checkpoints"), limit, cursor, prefix=prefix)

    def _r_get_checkpoint(self, id_or_name: str) -> Request:
        return route_request(ROUTE_CHECKPOINT, "/v1/checkpoints/" + escape(id_or_name))

    def _r_delete_checkpoint(self, id_or_name: str) -> Request:
        return self._write(ROUTE_DELETE_CHECKPOINT, "/v1/checkpoints/" + escape(id_or_name), None, NOT_GIVEN, NOT_GIVEN)

    def _r_diff(self, from_: str, *, to: Optional[str], prefix: Optional[str], limit: Optional[int],
                cursor: Optional[str], patch: bool) -> Request:
        req = _page(route_request(ROUTE_DIFF, "/v1/diff"), limit, cursor, to=to, prefix=prefix)
        req.query["from"] = from_
        if patch:
            req.query["format"] = "patch"
        return req

    def _r_restore(self, prefix: str, to: str, *, force: bool, dry_run: bool,
                   idempotency_key: Optional[str]) -> Request:
        key = None if dry_run else _required_key(idempotency_key)
        req = route_request(ROUTE_RESTORE, "/v1/restore", key=key, agent_id=NOT_GIVEN, run_id=NOT_GIVEN)
        return _json_body(req, {"prefix": prefix, "to": to, "force": bool(force), "dry_run": bool(dry_run)})

    # Forks and merges.

    def _r_create_fork(self, from_: str, to: str, *, as_of: Optional[str], idempotency_key: Optional[str]) -> Request:
        req = self._write(ROUTE_CREATE_FORK, "/v1/forks", idempotency_key, NOT_GIVEN, NOT_GIVEN)
        body = {"from": from_, "to": to}
        if as_of is not None:
            body["as_of"] = as_of
        return _json_body(req, body)

    def _r_list_forks(self, *, limit: Optional[int], cursor: Optional[str]) -> Request:
        return _page(route_request(ROUTE_LIST_FORKS, "/v1/forks"), limit, cursor)

    def _r_get_fork(self, fork_id: str) -> Request:
        return route_request(ROUTE_FORK, "/v1/forks/" + escape(fork_id))

    def _r_delete_fork(self, fork_id: str) -> Request:
        return self._write(ROUTE_DELETE_FORK, "/v1/forks/" + escape(fork_id), None, NOT_GIVEN, NOT_GIVEN)

    def _r_merge(self, fork_id: str, *, on_conflict: Optional[str], dry_run: bool,
                 idempotency_key: Optional[str]) -> Request:
        path = "/v1/forks/" + escape(fork_id) + "/merge"
        if dry_run:
            req = route_request(ROUTE_MERGE, path)
        else:
            req = self._write(ROUTE_MERGE, path, idempotency_key, NOT_GIVEN, NOT_GIVEN)
        body: dict[str, Any] = {"dry_run": bool(dry_run)}
        if on_conflict is not None:
            body["on_conflict"] = on_conflict
        return _json_body(req, body)


def _required_key(given: Optional[str]) -> str:
    """The Idempotency-Key of a route that requires one: the caller's, else a new one even when generation is off."""
    if given is None:
        return new_idempotency_key()
    check_key(given)
    return given


def _conditional(req: Request, range: Optional[str], if_range: Optional[str], if_none_match: Optional[str]) -> Request:
    """The Range and conditional headers of a content read."""
    _set(req.headers, "Range", range)
    _set(req.headers, "If-Range", if_range)
    _set(req.headers, "If-None-Match", if_none_match)
    return req


def ask_redirect(req: Request, redirect: bool) -> Request:
    """With redirect, a content read asks for a presigned S3 URL (redirect=true)."""
    if redirect:
        req.query = {**(req.query or {}), "redirect": "true"}
    return req


def presigned_request(reply_headers: httpx.Headers, url: httpx.URL, range: Optional[str],
                      if_range: Optional[str]) -> httpx.Request:
    """The GET of the presigned URL a 307 names: no Authorization (the token is not S3's to see).

    A Range is passed on; If-Range is decided here against the 307's ETag
    (S3's own ETags are not AgentFS's), so content replaced since comes back whole.
    """
    location = reply_headers.get("location")
    if not location:
        raise RedirectError(307, "the server's redirect has no Location")
    headers = {}
    if range and (if_range is None or if_range == reply_headers.get("etag")):
        headers["Range"] = range
    return httpx.Request("GET", url.join(location), headers=headers)


def redirect_refused(status: int, body: bytes) -> RedirectError:
    """The error of a presigned URL S3 refused, with S3's code when its body names one."""
    m = re.search(rb"<Code>([^<]{1,100})</Code>", body)
    return RedirectError(status, m.group(1).decode("ascii", "replace") if m else None)


def _check_wait(what: str, wait: Optional[float], most: int) -> None:
    if wait is not None and not 0 <= wait <= most:
        raise ValueError(f"{what}: wait {wait!r} is outside 0 to {most} seconds")


def _hold(req: Request, wait: Optional[float]) -> Request:
    """Ask the server to hold the request up to wait seconds (rounded up; none for 0), and allow for it."""
    secs = int(-(-wait // 1)) if wait else 0
    if secs > 0:
        req.query["wait"] = str(secs)
        req.timeout = secs + 60.0
    return req


def _fields(fields: Optional[Sequence[str]]) -> Optional[str]:
    """The fields= value of a listing that asks for only these File members (None: whole files)."""
    if fields is None:
        return None
    if isinstance(fields, str):
        raise TypeError("fields is a sequence of File member names, e.g. ['path', 'size_bytes']")
    return ",".join(fields)


def _page(req: Request, limit: Optional[int], cursor: Optional[str], **filters: Optional[str]) -> Request:
    """The query of a keyset page, with the filters given (those not None)."""
    for name, v in filters.items():
        if v is not None:
            req.query[name] = v
    if limit is not None:
        req.query["limit"] = str(limit)
    if cursor is not None:
        req.query["cursor"] = cursor
    return req


def _rfc3339(name: str, at: datetime) -> str:
    """An aware datetime as the RFC 3339 text the API takes."""
    if not isinstance(at, datetime) or at.tzinfo is None:
        raise ValueError(f"{name} {at!r} must be a timezone-aware datetime")
    return at.astimezone(timezone.utc).isoformat().replace("+00:00", "Z")


def _file_path(file_id: str) -> str:
    return "/v1/files/" + escape(file_id)


def _version_number(version: int) -> int:
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise ValueError(f"version {version!r}: versions are numbered from 1")
    return version


def _version_path(file_id: str, version: int) -> str:
    return _file_path(file_id) + "/versions/" + str(_version_number(version))


def _run_path(run_id: str) -> str:
    """/v1/runs/{run_id}, the run id one escaped segment (a / in it is sent as %2F)."""
    check_tag("run_id", run_id)
    if run_id is None:
        raise ValueError("run_id is required")
    return "/v1/runs/" + escape(run_id)


def check_upload_options(
    local_path: Union[str, os.PathLike[str]], parallel: int, sha256: Optional[str], threshold: int
) -> tuple[str, int, Optional[str]]:
    """Validate upload_file's arguments before anything is sent.

    Returns the local path, the size of the regular file there, and the SHA-256 in lowercase (or None).
    """
    path = os.fspath(local_path)
    size = regular_file_size(path)
    if size < 0:
        raise ValueError(f"upload: negative size {size}")
    if not isinstance(parallel, int) or parallel < 1:
        raise ValueError(f"upload: parallel {parallel!r} must be at least 1")
    sha = None
    if sha256 is not None:
        if not _SHA256.match(sha256):
            raise ValueError(f"upload: sha256 {sha256!r} is not 64 hex digits")
        sha = sha256.lower()
    if threshold < 0:
        raise ValueError(f"upload_file: threshold {threshold} is negative")
    return path, size, sha


class PollPace:
    """The waits between polls of something the server finishes in the background, and their deadline.

    They start POLL_FIRST apart and slow down to POLL_MAX; with a timeout,
    ``expired`` says when the next wait would end past it.
    """

    def __init__(self, timeout: Optional[float] = None) -> None:
        self._wait = POLL_FIRST
        self._deadline = None if timeout is None else time.monotonic() + timeout

    def expired(self) -> bool:
        """Whether the next wait would end after the deadline."""
        return self._deadline is not None and time.monotonic() + self._wait > self._deadline

    def next(self) -> float:
        """The next wait, in seconds."""
        wait = self._wait
        self._wait = min(wait * 1.5, POLL_MAX)
        return wait


def completed_file(u: Upload) -> Optional[File]:
    """The file of a session the server completes in the background, or None while it is still completing.

    Raises the problem that failed the session, and AgentFSError if it ended any other way.
    """
    if u.status == "completed" and u.file is not None:
        return u.file
    if u.status == "failed" and u.error is not None:
        raise u.error
    if u.status not in ("completing", "completed"):
        raise AgentFSError(f"upload {u.id} ended {u.status} while completing")
    return None
