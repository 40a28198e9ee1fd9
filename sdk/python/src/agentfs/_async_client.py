"""The client of one AgentFS server.

Written once, in _async_client.py: scripts/unasync.py makes _client.py of
it, and tests/test_unasync.py fails while _client.py is stale. Each
docstring is written once, for both clients; see "Changing the clients" in
sdk/python/README.md.
"""

from __future__ import annotations

import asyncio
import os
from datetime import datetime, timedelta
from typing import Any, AsyncIterator, Awaitable, BinaryIO, Callable, Mapping, Optional, Sequence, TypeVar, Union

import httpx

from ._base import (
    DEFAULT_PARALLEL,
    DEFAULT_SESSION_THRESHOLD,
    DEFAULT_TIMEOUT,
    MAX_EVENT_WAIT,
    MAX_PROBLEM_BYTES,
    ArchiveProgress,
    BaseClient,
    ContentInfo,
    PollPace,
    Received,
    archive_format,
    archive_stopped,
    ask_redirect,
    check_upload_options,
    completed_file,
    destination_file,
    links_of,
    page_of,
    presigned_request,
    problem_of,
    redirect_refused,
    tokens_of,
    webhooks_of,
    deliveries_of,
)
from ._errors import APIConnectionError, PayloadTooLargeError
from ._events import AsyncEventFollower
from ._models import (
    Webhook,
    WebhookDelivery,
    AsyncPage,
    AsyncSearchResults,
    Batch,
    BatchOp,
    Change,
    Checkpoint,
    Fork,
    Merge,
    RestorePlan,
    EventPage,
    File,
    FileVersion,
    Folder,
    Link,
    Operation,
    Protocol,
    Run,
    RunRevertPlan,
    RunRecovery,
    Token,
    Upload,
    UploadPart,
)
from ._request import NOT_GIVEN, Request
from ._retry import (
    NoResponse,
    Outcome,
    RandomSource,
    Reply,
    RetryPolicy,
    Sleep,
    retry_steps,
)
from ._uploads import (
    PartJob,
    Progress,
    ProgressCallback,
    arun_parallel,
    check_plan,
    check_stored,
    counted_section,
    part_jobs,
    sha256_of_file,
)

T = TypeVar("T")


class AsyncContent(ContentInfo):
    """A file's bytes as they stream from the server. Close it (or use ``async with``) when done."""

    def __init__(self, response: httpx.Response, announced: Optional[httpx.Headers] = None) -> None:
        super().__init__(response, announced)
        self._response = response

    def aiter_bytes(self, chunk_size: int = 1 << 20) -> AsyncIterator[bytes]:
        """The bytes, chunk by chunk, as they arrive."""
        return self._response.aiter_bytes(chunk_size)

    async def aread(self) -> bytes:
        """All the bytes (for small files; stream large ones with aiter_bytes)."""
        return await self._response.aread()

    async def aclose(self) -> None:
        """Release the connection."""
        await self._response.aclose()

    async def __aenter__(self) -> "AsyncContent":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()


class AsyncClient(BaseClient):
    """A client of one AgentFS server as one token's subject, safe to share between concurrent callers.

    ``base_url`` and ``token`` default to the AGENTFS_URL and AGENTFS_TOKEN
    environment variables. ``agent_id`` and ``run_id`` are sent as X-Agent-ID
    and X-Run-ID on every request (files carry them and can be listed by
    them); write methods take them per call too. Every write gets one
    Idempotency-Key that all its attempts share (``idempotency_keys=False``
    turns generation off). ``sleep`` (asyncio.sleep by default) and
    ``random`` are what the retry waits use; tests pass their own.
    """

    _http: httpx.AsyncClient

    def __init__(
        self,
        base_url: Optional[str] = None,
        token: Optional[str] = None,
        *,
        agent_id: Optional[str] = None,
        run_id: Optional[str] = None,
        retry: Optional[RetryPolicy] = None,
        idempotency_keys: bool = True,
        timeout: Union[float, httpx.Timeout, None] = DEFAULT_TIMEOUT,
        http_client: Optional[httpx.AsyncClient] = None,
        sleep: Optional[Callable[[float], Awaitable[Any]]] = None,
        random: Optional[RandomSource] = None,
    ) -> None:
        super().__init__(base_url, token, agent_id=agent_id, run_id=run_id, retry=retry,
                         idempotency_keys=idempotency_keys, random=random)
        self._owns_http = http_client is None
        self._http = http_client if http_client is not None else httpx.AsyncClient(timeout=timeout)
        self._sleep = sleep if sleep is not None else asyncio.sleep

    async def aclose(self) -> None:
        """Close the connections (of a client that made its own httpx.AsyncClient)."""
        if self._owns_http:
            await self._http.aclose()

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()

    # Sending under the retry policy.

    async def _run(self, req: Request, *, stream: bool = False) -> Reply:
        steps = retry_steps(req, self.retry, self._rng)
        step = next(steps)
        while True:
            out: Outcome = None
            if isinstance(step, Sleep):
                await self._sleep(step.seconds)
            else:
                out = await self._send_once(*self._step_request(req, step, stream))
            try:
                step = steps.send(out)
            except StopIteration as done:
                reply: Reply = done.value
                return reply

    async def _send_once(self, req: Request, stream: bool) -> Outcome:
        request = self._http_request(req, None if req.body is None else req.body.async_content())
        try:
            resp = await self._http.send(request, stream=True)
        except httpx.TransportError as e:
            return NoResponse(e)
        if resp.status_code >= 400:
            body = b""
            try:
                async for chunk in resp.aiter_bytes():
                    body += chunk
                    if len(body) >= MAX_PROBLEM_BYTES:
                        break
            except httpx.TransportError:
                pass
            finally:
                await resp.aclose()
            return problem_of(resp, body)
        if stream:
            return Reply(resp.status_code, resp.headers, stream=resp)
        try:
            data = await resp.aread()
        except httpx.TransportError as e:
            return NoResponse(e)
        finally:
            await resp.aclose()
        return Reply(resp.status_code, resp.headers, body=data)

    async def _json(self, req: Request) -> Any:
        reply = await self._run(req)
        return reply.json()

    async def _page(self, req: Request, parse: Callable[[Mapping[str, Any]], T],
                    fetch: Callable[[str], Awaitable[AsyncPage[T]]]) -> AsyncPage[T]:
        """The first page of a listing; fetch(cursor) gets the next."""
        return page_of(await self._json(req), parse, fetch, AsyncPage)

    # Protocol and operations.

    async def protocol(self) -> Protocol:
        """What the server guarantees (GET /v1/protocol): its idempotency rules, retry policy and limits."""
        return Protocol.from_dict(await self._json(self._r_protocol()))

    async def get_operation(self, key: str) -> Operation:
        """What an Idempotency-Key holds (GET /v1/operations/{key}).

        NotFoundError means the key holds nothing, which proves that no write
        happened under it (within the server's idempotency retention).
        """
        return Operation.from_dict(await self._json(self._operation_request(key)))

    # Files.

    async def put_file(
        self,
        path: str,
        content: Any,
        *,
        if_exists: Optional[str] = None,
        if_match: Optional[str] = None,
        if_none_match: Optional[str] = None,
        content_type: Optional[str] = None,
        sha256: Optional[str] = None,
        size: Optional[int] = None,
        idempotency_key: Optional[str] = None,
        agent_id: Any = NOT_GIVEN,
        run_id: Any = NOT_GIVEN,
        expires_in: Union[int, float, timedelta, None] = None,
        mode: Optional[int] = None,
        mtime: Optional[datetime] = None,
        kind: Optional[str] = None,
    ) -> File:
        """Upload content as the file at path (POST /v1/files).

        content is bytes, a pathlib.Path (streamed from disk), a binary file
        (streamed from its offset; rewound for a retry when seekable), an
        AsyncIterator or any other iterator of bytes (sent once, chunked
        unless ``size`` is given) or a function returning fresh content for
        every attempt. ``if_exists``:
        "error" (default: PathExistsError if a live file holds the path) or
        "replace" (the file keeps its id and url). ``if_match`` replaces only
        the file with that etag; ``if_none_match="*"`` creates only. ``sha256``
        (hex) is sent as Content-Digest and checked by the server.
        ``expires_in`` (seconds or a timedelta, 60 s to 365 days) makes the
        file expire that long after the write: from then on it counts as
        deleted. A replace without it keeps the file's expiry. ``mode``
        (permission bits, e.g. 0o755), ``mtime`` (an aware datetime) and
        ``kind`` ("file", "symlink" whose content is the target, "directory"
        with empty content) are kept as the file's metadata; a replace
        without mode or kind keeps the file's.
        """
        return File.from_dict(await self._json(self._r_put_file(
            path, content, if_exists=if_exists, if_match=if_match, if_none_match=if_none_match,
            content_type=content_type, sha256=sha256, size=size, idempotency_key=idempotency_key,
            agent_id=agent_id, run_id=run_id, expires_in=expires_in, mode=mode, mtime=mtime, kind=kind)))

    async def get_file(self, file_id: str) -> File:
        """A file's metadata (GET /v1/files/{id}), also of a deleted file not purged yet."""
        return File.from_dict(await self._json(self._r_get_file(file_id)))

    async def list_files(
        self,
        *,
        run_id: Optional[str] = None,
        agent_id: Optional[str] = None,
        prefix: Optional[str] = None,
        path: Optional[str] = None,
        include_deleted: bool = False,
        limit: Optional[int] = None,
        cursor: Optional[str] = None,
        fields: Optional[Sequence[str]] = None,
    ) -> AsyncPage[File]:
        """One page of files, newest first (GET /v1/files); iterate it to walk every page.

        ``run_id``/``agent_id`` match the request that created a file,
        ``prefix`` the start of its path, ``path`` the whole path. ``limit``
        is the page size (1-1000). ``fields`` (``["path", "size_bytes"]``)
        asks for only those File members: smaller pages, fewer columns read
        by the server; ``id`` always comes, the others read as their
        defaults.
        """
        req = self._r_list_files(run_id=run_id, agent_id=agent_id, prefix=prefix, path=path,
                                 include_deleted=include_deleted, limit=limit, cursor=cursor, fields=fields)
        return await self._page(req, File.from_dict, lambda c: self.list_files(
            run_id=run_id, agent_id=agent_id, prefix=prefix, path=path, include_deleted=include_deleted, limit=limit,
            cursor=c, fields=fields))

    async def list_folder(self, prefix: str = "", *, limit: Optional[int] = None,
                          cursor: Optional[str] = None, fields: Optional[Sequence[str]] = None) -> Folder:
        """One page of a folder (GET /v1/files?delimiter=/): the files directly under prefix and the folders below it.

        Entries come in byte order of their names; pass ``next_cursor`` as
        ``cursor`` for the next page. It never walks the folders' subtrees.
        ``fields`` asks for only those File members, as for list_files.
        """
        return Folder.from_dict(await self._json(self._r_list_folder(prefix=prefix, limit=limit, cursor=cursor,
                                                                     fields=fields)))

    async def file_content(
        self,
        file_id: str,
        *,
        range: Optional[str] = None,
        if_range: Optional[str] = None,
        if_none_match: Optional[str] = None,
        redirect: bool = False,
    ) -> AsyncContent:
        """Open a live file's bytes (GET /v1/files/{id}/content) as a stream; close it when done.

        ``range`` is one byte range ("bytes=0-1023", "bytes=100-", "bytes=-100"),
        answered 206. The request is retried until the response starts.
        With ``redirect``, a server with a public S3 endpoint answers with a
        presigned S3 URL and the bytes come from S3 itself (fetched without the
        token, once, not retried; RedirectError if S3 refuses it); the content's
        etag, sha256 and filename are still the server's. Other servers stream.
        """
        req = ask_redirect(self._r_content(file_id, range=range, if_range=if_range, if_none_match=if_none_match),
                           redirect)
        reply = await self._run(req, stream=True)
        if redirect and reply.stream.status_code == 307:
            return await self._presigned(reply.stream, range, if_range)
        return AsyncContent(reply.stream)

    async def _presigned(self, redirected: httpx.Response, range: Optional[str],
                         if_range: Optional[str]) -> AsyncContent:
        """The bytes of the presigned S3 URL a 307 names, described by the 307's headers."""
        await redirected.aclose()
        request = presigned_request(redirected.headers, redirected.request.url, range, if_range)
        try:
            resp = await self._http.send(request, stream=True, follow_redirects=False)
        except httpx.TransportError as e:
            raise APIConnectionError(f"the presigned S3 URL of the content: {e}") from e
        if resp.status_code not in (200, 206):
            try:
                body = await resp.aread()
            finally:
                await resp.aclose()
            raise redirect_refused(resp.status_code, body)
        return AsyncContent(resp, redirected.headers)

    async def download_file(self, file_id: str, destination: Union[str, os.PathLike[str], BinaryIO], *,
                            verify: bool = True, redirect: bool = False) -> int:
        """Stream a live file's bytes to a local path (written whole or not at all) or a binary file.

        Returns the number of bytes. With ``verify``, the bytes are checked
        against the SHA-256 the server declared (Repr-Digest). With
        ``redirect``, they come from S3 through a presigned URL when the
        server offers one (see file_content), and are verified the same.
        """
        async with await self.file_content(file_id, redirect=redirect) as content:
            with destination_file(destination) as out:
                return await _copy(content.aiter_bytes(), out, Received(content, verify=verify))

    async def delete_file(
        self,
        file_id: str,
        *,
        if_match: Optional[str] = None,
        idempotency_key: Optional[str] = None,
        agent_id: Any = NOT_GIVEN,
        run_id: Any = NOT_GIVEN,
    ) -> File:
        """Soft-delete a file (DELETE /v1/files/{id}); returns it with deleted_at set. Safe to repeat."""
        return File.from_dict(await self._json(self._r_delete_file(
            file_id, if_match=if_match, idempotency_key=idempotency_key, agent_id=agent_id, run_id=run_id)))

    async def restore_file(
        self,
        file_id: str,
        *,
        idempotency_key: Optional[str] = None,
        agent_id: Any = NOT_GIVEN,
        run_id: Any = NOT_GIVEN,
    ) -> File:
        """Undo a delete (POST /v1/files/{id}/restore). PathExistsError: another file took the path."""
        return File.from_dict(await self._json(self._r_restore_file(
            file_id, idempotency_key=idempotency_key, agent_id=agent_id, run_id=run_id)))

    # Upload sessions.

    async def create_upload(
        self,
        path: str,
        size_bytes: int,
        *,
        content_type: Optional[str] = None,
        if_exists: Optional[str] = None,
        sha256: Optional[str] = None,
        idempotency_key: Optional[str] = None,
        agent_id: Any = NOT_GIVEN,
        run_id: Any = NOT_GIVEN,
        expires_in: Union[int, float, timedelta, None] = None,
    ) -> Upload:
        """Start an upload session (POST /v1/uploads), or get back the live one with the same
        path, size, content type and SHA-256, with the parts it holds: send only the missing ones.
        ``expires_in`` makes the completed file expire that long after its complete."""
        return Upload.from_dict(await self._json(self._r_create_upload(
            path, size_bytes, content_type=content_type, if_exists=if_exists, sha256=sha256,
            idempotency_key=idempotency_key, agent_id=agent_id, run_id=run_id, expires_in=expires_in)))

    async def get_upload(self, upload_id: str) -> Upload:
        """A session with the parts received so far (GET /v1/uploads/{id})."""
        return Upload.from_dict(await self._json(self._r_get_upload(upload_id)))

    async def upload_part(
        self,
        upload_id: str,
        part_number: int,
        content: Any,
        *,
        size: Optional[int] = None,
        sha256: Optional[str] = None,
        idempotency_key: Optional[str] = None,
        agent_id: Any = NOT_GIVEN,
        run_id: Any = NOT_GIVEN,
    ) -> UploadPart:
        """Store part part_number (from 1) of a pending session (PUT /v1/uploads/{id}/parts/{n}).

        Every part but the last has exactly the session's part_size bytes;
        sending a part again replaces it. ``sha256`` (hex) is sent as
        Content-Digest, so a corrupted body is refused.
        """
        return UploadPart.from_dict(await self._json(self._r_upload_part(
            upload_id, part_number, content, size=size, sha256=sha256, idempotency_key=idempotency_key,
            agent_id=agent_id, run_id=run_id)))

    async def complete_upload(
        self,
        upload_id: str,
        *,
        if_exists: Optional[str] = None,
        sha256: Optional[str] = None,
        if_match: Optional[str] = None,
        idempotency_key: Optional[str] = None,
        agent_id: Any = NOT_GIVEN,
        run_id: Any = NOT_GIVEN,
    ) -> File:
        """Assemble the session's parts into the file at its path (POST /v1/uploads/{id}/complete).

        Completing a completed session returns the same file. A 422
        PARTS_MISSING lists ``missing_parts``. Should the server finish in
        the background (202), the session is polled until it ends.
        """
        reply = await self._run(self._r_complete_upload(
            upload_id, if_exists=if_exists, sha256=sha256, if_match=if_match, idempotency_key=idempotency_key,
            agent_id=agent_id, run_id=run_id))
        if reply.status != 202:
            return File.from_dict(reply.json())
        return await self._await_completion(Upload.from_dict(reply.json()))

    async def _await_completion(self, u: Upload) -> File:
        pace = PollPace()
        while True:
            f = completed_file(u)
            if f is not None:
                return f
            await self._sleep(pace.next())
            u = await self.get_upload(u.id)

    async def abort_upload(
        self,
        upload_id: str,
        *,
        idempotency_key: Optional[str] = None,
        agent_id: Any = NOT_GIVEN,
        run_id: Any = NOT_GIVEN,
    ) -> Upload:
        """Abort a session (DELETE /v1/uploads/{id}); repeating it is safe."""
        return Upload.from_dict(await self._json(self._r_abort_upload(
            upload_id, idempotency_key=idempotency_key, agent_id=agent_id, run_id=run_id)))

    async def upload_file(
        self,
        local_path: Union[str, os.PathLike[str]],
        remote_path: str,
        *,
        if_exists: Optional[str] = None,
        if_match: Optional[str] = None,
        content_type: Optional[str] = None,
        sha256: Optional[str] = None,
        parallel: int = DEFAULT_PARALLEL,
        progress: Optional[ProgressCallback] = None,
        on_session: Optional[Callable[[Upload], Any]] = None,
        threshold: int = DEFAULT_SESSION_THRESHOLD,
        idempotency_key: Optional[str] = None,
        agent_id: Any = NOT_GIVEN,
        run_id: Any = NOT_GIVEN,
        expires_in: Union[int, float, timedelta, None] = None,
    ) -> File:
        """Upload a local file to remote_path and return the file.

        Below ``threshold`` bytes (64 MiB) it is one POST /v1/files;
        from there on, or when the server answers PAYLOAD_TOO_LARGE, it goes
        through an upload session (``threshold=0``: always, except empty
        content). The session is resumed if an interrupted upload of the same
        content left one: parts it holds with the same SHA-256 are not sent
        again; the others go ``parallel`` at a time, each with its
        Content-Digest, then the session is completed. ``progress(sent, total)``
        is never called concurrently; sent may go back when a part is sent
        again, and ends at total. ``on_session`` sees the session created or
        resumed. On failure the session stays pending: call again to resume.
        ``idempotency_key`` names the single POST of a small file (a session
        resumes without one). ``expires_in`` as for put_file.
        """
        path, size, sha = check_upload_options(local_path, parallel, sha256, threshold)
        attribution = {"agent_id": agent_id, "run_id": run_id}
        if size == 0 or size < threshold:
            try:
                return await self._put_local(path, size, remote_path, if_exists=if_exists, if_match=if_match,
                                             content_type=content_type, sha256=sha, progress=progress,
                                             idempotency_key=idempotency_key, expires_in=expires_in,
                                             **attribution)
            except PayloadTooLargeError:
                if size == 0:
                    raise
        if sha is None:
            sha = await asyncio.to_thread(sha256_of_file, path)
        u = await self.create_upload(remote_path, size, content_type=content_type, if_exists=if_exists,
                                     sha256=sha, expires_in=expires_in, **attribution)
        check_plan(u, size)
        if on_session is not None:
            on_session(u)
        prog = Progress(progress, size)
        await self._send_parts(u, path, parallel, prog, attribution)
        # The session may have been started by an earlier call with another if_exists: say what this one wants.
        f = await self.complete_upload(u.id, if_exists=if_exists or "error", if_match=if_match, **attribution)
        prog.finish()
        return f

    async def _put_local(self, path: str, size: int, remote_path: str, *,
                         progress: Optional[ProgressCallback], **kw: Any) -> File:
        prog = Progress(progress, size)
        with counted_section(path, 0, size, prog) as (body, _):
            f = await self.put_file(remote_path, body, **kw)
        prog.finish()
        return f

    async def _send_parts(self, u: Upload, path: str, parallel: int, prog: Progress,
                          attribution: Mapping[str, Any]) -> None:
        await arun_parallel(lambda job: self._send_part(u.id, path, job, prog, attribution), part_jobs(u), parallel)

    async def _send_part(self, upload_id: str, path: str, job: PartJob, prog: Progress,
                         attribution: Mapping[str, Any]) -> None:
        sha = await asyncio.to_thread(sha256_of_file, path, job.offset, job.size)
        if sha == job.stored:
            prog.add(job.size)
            return
        with counted_section(path, job.offset, job.size, prog) as (body, counter):
            part = await self.upload_part(upload_id, job.number, body, sha256=sha, **attribution)
        counter.settle(job.size)
        check_stored(upload_id, job.number, part.sha256, sha)

    # Batches.

    async def create_batch(
        self,
        operations: Sequence[Union[BatchOp, Mapping[str, Any]]],
        *,
        idempotency_key: Optional[str] = None,
        wait: Optional[float] = None,
        agent_id: Any = NOT_GIVEN,
        run_id: Any = NOT_GIVEN,
    ) -> Batch:
        """Admit operations as one batch (POST /v1/batch); they run in order in the background.

        The batch always carries an Idempotency-Key (``idempotency_key``, or a
        new one): the same key and operations again return the same batch.
        ``wait`` (at most 30 s) asks the server to answer once the batch is
        terminal or the time has passed. One invalid operation is an
        UnprocessableEntityError naming it, and nothing runs.
        """
        return Batch.from_dict(await self._json(self._r_create_batch(
            operations, idempotency_key=idempotency_key, wait=wait, agent_id=agent_id, run_id=run_id)))

    async def get_batch(self, batch_id: str) -> Batch:
        """A batch with every item's outcome so far (GET /v1/batch/{id})."""
        return Batch.from_dict(await self._json(self._r_get_batch(batch_id)))

    async def wait_batch(self, batch_id: str, *, timeout: Optional[float] = None) -> Batch:
        """Poll a batch until it is terminal and return it; TimeoutError after ``timeout`` seconds."""
        pace = PollPace(timeout)
        while True:
            b = await self.get_batch(batch_id)
            if b.terminal:
                return b
            if pace.expired():
                raise TimeoutError(f"batch {batch_id} is still {b.status} after {timeout} s")
            await self._sleep(pace.next())

    async def list_batches(self, *, status: Optional[str] = None, limit: Optional[int] = None,
                           cursor: Optional[str] = None) -> AsyncPage[Batch]:
        """One page of batches, newest first, with their counts but not their items (GET /v1/batch).

        Iterate it to walk every page; get_batch returns one with its items.
        """
        return await self._page(self._r_list_batches(status=status, limit=limit, cursor=cursor), Batch.from_dict,
                                lambda c: self.list_batches(status=status, limit=limit, cursor=c))

    async def cancel_batch(self, batch_id: str, *, idempotency_key: Optional[str] = None,
                           agent_id: Any = NOT_GIVEN, run_id: Any = NOT_GIVEN) -> Batch:
        """Cancel a batch (POST /v1/batch/{id}/cancel): its pending items become canceled.

        An item already running finishes, and the batch ends "canceled" once
        nothing runs (wait_batch waits for that). Cancelling a batch that has
        ended returns it unchanged; repeating it is safe.
        """
        return Batch.from_dict(await self._json(self._r_cancel_batch(
            batch_id, idempotency_key=idempotency_key, agent_id=agent_id, run_id=run_id)))

    async def list_uploads(self, *, status: Optional[str] = None, path: Optional[str] = None,
                           limit: Optional[int] = None, cursor: Optional[str] = None) -> AsyncPage[Upload]:
        """One page of upload sessions, newest first (GET /v1/uploads); iterate it to walk every page.

        ``status="pending"`` finds what interrupted uploads left to resume.
        """
        return await self._page(self._r_list_uploads(status=status, path=path, limit=limit, cursor=cursor),
                                Upload.from_dict,
                                lambda c: self.list_uploads(status=status, path=path, limit=limit, cursor=c))

    # File history and lifecycle.

    async def list_versions(self, file_id: str, *, limit: Optional[int] = None,
                            cursor: Optional[str] = None) -> AsyncPage[FileVersion]:
        """One page of a file's versions, newest first (GET /v1/files/{id}/versions), also of a deleted file."""
        return await self._page(self._r_list_versions(file_id, limit=limit, cursor=cursor), FileVersion.from_dict,
                                lambda c: self.list_versions(file_id, limit=limit, cursor=c))

    async def get_version(self, file_id: str, version: int) -> FileVersion:
        """Version ``version`` of a file (GET /v1/files/{id}/versions/{n}); one the retention dropped is NotFoundError."""
        return FileVersion.from_dict(await self._json(self._r_get_version(file_id, version)))

    async def version_content(self, file_id: str, version: int, *, range: Optional[str] = None,
                              if_range: Optional[str] = None, if_none_match: Optional[str] = None,
                              redirect: bool = False) -> AsyncContent:
        """Open the bytes of one version (GET /v1/files/{id}/versions/{n}/content), as file_content does."""
        req = ask_redirect(self._r_version_content(file_id, version, range=range, if_range=if_range,
                                                   if_none_match=if_none_match), redirect)
        reply = await self._run(req, stream=True)
        if redirect and reply.stream.status_code == 307:
            return await self._presigned(reply.stream, range, if_range)
        return AsyncContent(reply.stream)

    async def revert_file(self, file_id: str, version: int, *, if_match: Optional[str] = None,
                          idempotency_key: Optional[str] = None, agent_id: Any = NOT_GIVEN,
                          run_id: Any = NOT_GIVEN) -> File:
        """Make version ``version``'s content the file's current content, as a new version (POST /v1/files/{id}/revert).

        Reverting to the content the file has changes nothing. ``if_match``
        refuses (PreconditionFailedError) if the file was written meanwhile. A
        deleted file is NotFoundError: restore it first.
        """
        return File.from_dict(await self._json(self._r_revert_file(
            file_id, version, if_match=if_match, idempotency_key=idempotency_key, agent_id=agent_id, run_id=run_id)))

    async def move_file(self, file_id: str, path: str, *, if_exists: Optional[str] = None,
                        if_match: Optional[str] = None, idempotency_key: Optional[str] = None,
                        agent_id: Any = NOT_GIVEN, run_id: Any = NOT_GIVEN) -> File:
        """Give a file a new path (POST /v1/files/{id}/move); it keeps its id, url, version and history.

        A live file at path is PathExistsError unless ``if_exists="replace"``,
        which deletes it (restorably) in the same transaction, or
        ``if_exists="overwrite"``, which makes this file's content the next
        version of that one (it keeps its id and history; the answer is that
        file) and deletes this one (restorably): an editor's atomic save.
        """
        return File.from_dict(await self._json(self._r_move_file(
            file_id, path, if_exists=if_exists, if_match=if_match, idempotency_key=idempotency_key,
            agent_id=agent_id, run_id=run_id)))

    async def set_expiry(self, file_id: str, expires_at: Optional[datetime], *, if_match: Optional[str] = None,
                         idempotency_key: Optional[str] = None, agent_id: Any = NOT_GIVEN,
                         run_id: Any = NOT_GIVEN) -> File:
        """Make a live file expire at ``expires_at`` (an aware datetime, 60 s to 365 days ahead), or never with None.

        PATCH /v1/files/{id}. From then on the file counts as deleted. A
        repeat sets the same value, so it is safe.
        """
        return File.from_dict(await self._json(self._r_set_expiry(
            file_id, expires_at, if_match=if_match, idempotency_key=idempotency_key, agent_id=agent_id,
            run_id=run_id)))

    async def set_metadata(self, file_id: str, *, mode: Optional[int] = None, mtime: Optional[datetime] = None,
                           if_match: Optional[str] = None, idempotency_key: Optional[str] = None,
                           agent_id: Any = NOT_GIVEN, run_id: Any = NOT_GIVEN) -> File:
        """Set a live file's mode (permission bits) and/or mtime (an aware datetime) without a new version.

        PATCH /v1/files/{id}. A repeat sets the same values, so it is safe.
        """
        return File.from_dict(await self._json(self._r_set_metadata(
            file_id, mode=mode, mtime=mtime, if_match=if_match, idempotency_key=idempotency_key,
            agent_id=agent_id, run_id=run_id)))

    async def create_link(self, file_id: str, *, expires_in: Union[int, float, timedelta, None] = None,
                          version: Optional[int] = None, idempotency_key: Optional[str] = None,
                          agent_id: Any = NOT_GIVEN, run_id: Any = NOT_GIVEN) -> Link:
        """A share link to a file (POST /v1/files/{id}/links), for someone without a token.

        Its ``url`` is shown only in this answer: keep it. ``expires_in`` is 60 s
        to 7 days (default 1 h); ``version`` pins one version, else the link
        serves the current content whenever it is opened.
        """
        return Link.from_dict(await self._json(self._r_create_link(
            file_id, expires_in=expires_in, version=version, idempotency_key=idempotency_key, agent_id=agent_id,
            run_id=run_id)))

    async def links(self, file_id: str) -> list[Link]:
        """A file's links, newest first, revoked and expired ones included, without their URLs."""
        return links_of(await self._json(self._r_links(file_id)))

    async def revoke_link(self, link_id: str, *, idempotency_key: Optional[str] = None,
                          agent_id: Any = NOT_GIVEN, run_id: Any = NOT_GIVEN) -> Link:
        """Revoke a share link (DELETE /v1/links/{id}): its URL serves nothing from then on. Safe to repeat."""
        return Link.from_dict(await self._json(self._r_revoke_link(
            link_id, idempotency_key=idempotency_key, agent_id=agent_id, run_id=run_id)))

    # Delegation: scoped child tokens for sub-agents.

    async def create_token(self, *, scopes: Sequence[str], expires_in: Union[int, float, timedelta],
                           prefixes: Optional[Sequence[str]] = None, run_id_pin: Optional[str] = None,
                           agent_id_pin: Optional[str] = None, max_bytes: Optional[int] = None,
                           name: Optional[str] = None, idempotency_key: Optional[str] = None) -> Token:
        """A child of this client's token, for a sub-agent (POST /v1/tokens; needs the delegate scope).

        It never exceeds its parent: ``scopes`` a subset, each of ``prefixes``
        (folders such as ``"reports/"``) inside the parent's, ``expires_in``
        and ``max_bytes`` no later and no larger; ``run_id_pin`` and
        ``agent_id_pin`` attribute its every request. What is left out is the
        parent's. Its secret is ``token``, shown only in this answer.
        """
        return Token.from_dict(await self._json(self._r_create_token(
            scopes=scopes, expires_in=expires_in, prefixes=prefixes, run_id_pin=run_id_pin, agent_id_pin=agent_id_pin,
            max_bytes=max_bytes, name=name, idempotency_key=idempotency_key)))

    async def tokens(self) -> list[Token]:
        """This client's token and every token made from it, oldest first, without secrets."""
        return tokens_of(await self._json(self._r_tokens()))

    async def token(self, token_id: str) -> Token:
        """This client's token or one of its descendants (GET /v1/tokens/{id})."""
        return Token.from_dict(await self._json(self._r_token(token_id)))

    async def revoke_token(self, token_id: str, *, idempotency_key: Optional[str] = None) -> Token:
        """Revoke a token and every token made from it (DELETE /v1/tokens/{id}); every server refuses them within a second."""
        return Token.from_dict(await self._json(self._r_revoke_token(token_id, idempotency_key=idempotency_key)))

    # Webhooks: signed deliveries of the event feed.

    async def create_webhook(self, url: str, *, types: Optional[Sequence[str]] = None, prefix: Optional[str] = None,
                             run_id: Optional[str] = None, description: Optional[str] = None,
                             idempotency_key: Optional[str] = None) -> Webhook:
        """A webhook of the events that commit from now on (POST /v1/webhooks).

        Each matching event is POSTed to ``url`` in feed order, at least once,
        with Standard Webhooks signatures made with ``secret``, which only this
        answer shows (docs/webhooks.md).
        """
        return Webhook.from_dict(await self._json(self._r_create_webhook(
            url=url, types=types, prefix=prefix, run_id=run_id, description=description, idempotency_key=idempotency_key)))

    async def webhooks(self) -> list[Webhook]:
        """Your webhooks, oldest first, without secrets (GET /v1/webhooks)."""
        return webhooks_of(await self._json(self._r_webhooks()))

    async def webhook(self, webhook_id: str) -> Webhook:
        """One webhook, without its secret (GET /v1/webhooks/{id})."""
        return Webhook.from_dict(await self._json(self._r_webhook(webhook_id)))

    async def update_webhook(self, webhook_id: str, *, url: Optional[str] = None, types: Optional[Sequence[str]] = None,
                             status: Optional[str] = None, idempotency_key: Optional[str] = None) -> Webhook:
        """Change a webhook's url, types or status ("active" resumes it after its cursor; "disabled" stops it)."""
        return Webhook.from_dict(await self._json(self._r_update_webhook(
            webhook_id, url=url, types=types, status=status, idempotency_key=idempotency_key)))

    async def delete_webhook(self, webhook_id: str, *, idempotency_key: Optional[str] = None) -> Webhook:
        """Remove a webhook and its delivery log (DELETE /v1/webhooks/{id})."""
        return Webhook.from_dict(await self._json(self._r_delete_webhook(webhook_id, idempotency_key=idempotency_key)))

    async def rotate_webhook_secret(self, webhook_id: str, *, idempotency_key: Optional[str] = None) -> Webhook:
        """A new signing secret, in ``secret`` of this answer only; every attempt from now on is signed with it."""
        return Webhook.from_dict(await self._json(self._r_rotate_webhook(webhook_id, idempotency_key=idempotency_key)))

    async def replay_webhook(self, webhook_id: str, after: str, *, idempotency_key: Optional[str] = None) -> Webhook:
        """Deliver again every matching event after ``after`` (an event cursor, "start" or "now"), in order."""
        return Webhook.from_dict(await self._json(self._r_replay_webhook(webhook_id, after, idempotency_key=idempotency_key)))

    async def webhook_deliveries(self, webhook_id: str, *, limit: Optional[int] = None) -> list[WebhookDelivery]:
        """A webhook's latest delivery attempts, newest first (GET /v1/webhooks/{id}/deliveries)."""
        return deliveries_of(await self._json(self._r_webhook_deliveries(webhook_id, limit=limit)))

    # The run ledger: events, runs.

    async def events(
        self,
        *,
        after: Optional[str] = None,
        run_id: Optional[str] = None,
        agent_id: Optional[str] = None,
        file_id: Optional[str] = None,
        prefix: Optional[str] = None,
        types: Union[str, Sequence[str], None] = None,
        limit: Optional[int] = None,
        wait: Optional[float] = None,
    ) -> EventPage:
        """One page of your events, oldest first (GET /v1/events).

        ``after`` is a previous page's ``next_cursor``, ``"now"`` (the end of
        the feed) or None (the oldest event kept). Filters combine: the
        X-Run-ID and X-Agent-ID of the request that caused an event, a file,
        a path prefix, event ``types`` ("file.created", ...). ``wait`` (at
        most 30 s) holds the request until a matching event commits.
        Following ``next_cursor`` never skips an event and never repeats
        one; follow_events does it for you. CursorExpiredError: the cursor is
        older than the server's event retention.
        """
        return EventPage.from_dict(await self._json(self._r_events(
            after=after, run_id=run_id, agent_id=agent_id, file_id=file_id, prefix=prefix, types=types,
            limit=limit, wait=wait)))

    def follow_events(
        self,
        *,
        after: Optional[str] = None,
        run_id: Optional[str] = None,
        agent_id: Optional[str] = None,
        file_id: Optional[str] = None,
        prefix: Optional[str] = None,
        types: Union[str, Sequence[str], None] = None,
        limit: Optional[int] = None,
        wait: float = MAX_EVENT_WAIT,
    ) -> AsyncEventFollower:
        """Follow the events that match, from ``after`` on, for as long as you iterate.

        ``wait`` is how long each poll is held open by the server (1 to 30
        s; a proxy that cuts idle requests sooner needs less). A dropped
        connection, 408, 429 or 5xx is retried from the last cursor with the
        retry policy's backoff; once the feed has answered, without limit.
        Leaving the ``async with`` block or ``await follower.aclose()`` stops
        it. ``follower.cursor`` says where to resume, in this process or
        another::

            async with client.follow_events(run_id="run-1", after="now") as events:
                async for e in events:
                    print(e.type, e.path)
        """
        return AsyncEventFollower(self, self._follow_state(
            after=after, run_id=run_id, agent_id=agent_id, file_id=file_id, prefix=prefix, types=types, limit=limit,
            wait=wait))

    async def search(
        self,
        pattern: str,
        *,
        literal: bool = False,
        ignore_case: bool = False,
        prefix: Optional[str] = None,
        glob: Optional[str] = None,
        run_id: Optional[str] = None,
        context: Optional[int] = None,
        limit: Optional[int] = None,
        cursor: Optional[str] = None,
    ) -> AsyncSearchResults:
        """One page of the lines of your live text files that match ``pattern`` (GET /v1/search), by path then line.

        ``pattern`` is an RE2 regular expression (Go's syntax), or a fixed
        string with ``literal``; ``prefix``, ``glob`` (``**`` allowed) and
        ``run_id`` narrow the files; ``context`` (0-10) adds lines around
        each match; ``limit`` is matches per page (1-1000). Iterate the
        result to walk every match of every page. A search that cannot
        finish within the server's timeout raises a problem with code
        SEARCH_TOO_BROAD: narrow it.
        """
        req = self._r_search(pattern, literal=literal, ignore_case=ignore_case, prefix=prefix, glob=glob, run_id=run_id,
                             context=context, limit=limit, cursor=cursor)
        page = AsyncSearchResults.from_dict(await self._json(req))
        page._fetch = lambda c: self.search(pattern, literal=literal, ignore_case=ignore_case, prefix=prefix, glob=glob,
                                            run_id=run_id, context=context, limit=limit, cursor=c)
        return page

    async def run(self, run_id: str) -> Run:
        """What one run did (GET /v1/runs/{run_id}): its counts, the bytes it wrote, the files it left live.

        A run with no event of yours is NotFoundError. A "/" in the run id is
        sent escaped, as one path segment.
        """
        return Run.from_dict(await self._json(self._r_run(run_id)))

    async def list_runs(self, *, limit: Optional[int] = None, cursor: Optional[str] = None) -> AsyncPage[Run]:
        """One page of your runs, the one whose latest event is newest first (GET /v1/runs).

        Each is summarised as run() does; iterate the page to walk every page.
        """
        return await self._page(self._r_list_runs(limit=limit, cursor=cursor), Run.from_dict,
                                lambda c: self.list_runs(limit=limit, cursor=c))

    async def plan_revert_run(self, run_id: str, *, force: bool = False) -> RunRevertPlan:
        """What revert_run would do now, changing nothing (POST /v1/runs/{run_id}/revert with dry_run).

        Per file, newest change first: "delete" or "put_back" (with the
        version whose content comes back).
        """
        return RunRevertPlan.from_dict(await self._json(self._r_plan_revert_run(run_id, force=force)))

    async def run_recovery(self, run_id: str, *, limit: Optional[int] = None, cursor: Optional[str] = None) -> RunRecovery:
        """What a run left behind, and the next safe request for each thing it left open (GET /v1/runs/{run_id}/recovery).

        Everything in it holds at ``as_of`` (an event cursor). ``operations``
        are the run's idempotency keys, newest first (``limit`` per page, the
        next page at ``next_cursor``): completed (nothing to redo),
        in_progress (wait) or abandoned (nothing happened: send the same
        request again with the same key and run). ``next_actions`` are the
        requests still to send, in order. A run of which you hold nothing is
        NotFoundError.
        """
        return RunRecovery.from_dict(await self._json(self._r_run_recovery(run_id, limit, cursor)))

    async def run_archive(
        self,
        run_id: str,
        destination: Union[str, os.PathLike[str], BinaryIO],
        *,
        format: Optional[str] = None,
        progress: Optional[ArchiveProgress] = None,
    ) -> int:
        """Download the files a run created or last wrote that are live now, as one archive; returns its size.

        GET /v1/runs/{run_id}/archive: one zip (stored, not compressed) or
        tar, entries named by path, each a whole version. ``destination`` is
        a local path (written whole or not at all) or a binary file;
        ``format`` is "zip" or "tar" (default: tar for a path ending in .tar,
        else zip). ``progress(received, None)`` is told the bytes so far (the
        total is not known up front). The request is retried until the
        archive starts; one cut on the way raises APIConnectionError (a path
        is then left untouched).
        """
        fmt = archive_format(format, destination)
        reply = await self._run(self._r_run_archive(run_id, fmt), stream=True)
        received = Received(progress=progress)
        async with AsyncContent(reply.stream) as content:
            with destination_file(destination) as out:
                try:
                    return await _copy(content.aiter_bytes(), out, received)
                except httpx.TransportError as e:
                    raise archive_stopped(received.n, e) from e

    async def revert_run(self, run_id: str, *, force: bool = False, wait: bool = False,
                         timeout: Optional[float] = None, idempotency_key: Optional[str] = None) -> Batch:
        """Undo what a run did (POST /v1/runs/{run_id}/revert), as a batch of one undo item per file.

        A file the run created is deleted, one it replaced or reverted gets
        back the version it had before the run, one it deleted is restored,
        one it moved goes back; the most recently changed first. A file
        another run changed since fails its item with ChangedSinceRunError
        unless ``force``. The revert's own events carry this client's
        run_id, so it can be reverted in turn. The request always carries an
        Idempotency-Key (``idempotency_key``, or a new one): a retry after a
        lost answer, or the same key again, returns the same batch in its
        current state. With ``wait`` it returns once the batch has ended
        (TimeoutError after ``timeout`` seconds).
        """
        b = Batch.from_dict(await self._json(self._r_revert_run(
            run_id, force=force, idempotency_key=idempotency_key, agent_id=NOT_GIVEN, run_id_header=NOT_GIVEN)))
        if wait and not b.terminal:
            return await self.wait_batch(b.id, timeout=timeout)
        return b

    # Points in time.

    async def create_checkpoint(self, *, name: Optional[str] = None, prefix: Optional[str] = None,
                                note: Optional[str] = None, idempotency_key: Optional[str] = None) -> Checkpoint:
        """Name the present as a point (POST /v1/checkpoints): a position, not a copy.

        A name in use raises CheckpointExistsError.
        """
        return Checkpoint.from_dict(await self._json(self._r_create_checkpoint(
            name=name, prefix=prefix, note=note, idempotency_key=idempotency_key)))

    async def list_checkpoints(self, *, prefix: Optional[str] = None, limit: Optional[int] = None,
                               cursor: Optional[str] = None) -> AsyncPage[Checkpoint]:
        """One page of checkpoints, newest first (GET /v1/checkpoints)."""
        return await self._page(self._r_list_checkpoints(prefix=prefix, limit=limit, cursor=cursor),
                                Checkpoint.from_dict,
                                lambda c: self.list_checkpoints(prefix=prefix, limit=limit, cursor=c))

    async def get_checkpoint(self, id_or_name: str) -> Checkpoint:
        """A checkpoint by id or name (GET /v1/checkpoints/{id})."""
        return Checkpoint.from_dict(await self._json(self._r_get_checkpoint(id_or_name)))

    async def delete_checkpoint(self, id_or_name: str) -> None:
        """Forget a checkpoint (DELETE /v1/checkpoints/{id}); an unknown one raises NotFoundError."""
        await self._json(self._r_delete_checkpoint(id_or_name))

    async def diff(self, from_: str, *, to: Optional[str] = None, prefix: Optional[str] = None,
                   limit: Optional[int] = None, cursor: Optional[str] = None) -> list[Change]:
        """One page of what changed between the points ``from_`` and ``to`` (default now), by path (GET /v1/diff)."""
        d = await self._json(self._r_diff(from_, to=to, prefix=prefix, limit=limit, cursor=cursor, patch=False))
        return [Change.from_dict(c) for c in d.get("data") or []]

    async def diff_patch(self, from_: str, *, to: Optional[str] = None, prefix: Optional[str] = None,
                         limit: Optional[int] = None, cursor: Optional[str] = None) -> str:
        """The same diff as a unified diff that git apply accepts (format=patch)."""
        reply = await self._run(self._r_diff(from_, to=to, prefix=prefix, limit=limit, cursor=cursor, patch=True))
        return (reply.body or b"").decode("utf-8")

    async def plan_restore(self, prefix: str, to: str) -> RestorePlan:
        """What restore would do now, changing nothing (POST /v1/restore with dry_run)."""
        return RestorePlan.from_dict(await self._json(self._r_restore(prefix, to, force=False, dry_run=True,
                                                                       idempotency_key=None)))

    async def restore(self, prefix: str, to: str, *, force: bool = False, wait: bool = False,
                      timeout: Optional[float] = None, idempotency_key: Optional[str] = None) -> Batch:
        """Put the files under ``prefix`` back to their state at the point ``to`` (POST /v1/restore), as a batch.

        A file changed after the plan fails its item with PreconditionFailedError
        unless ``force``. With ``wait`` it returns once the batch has ended.
        """
        b = Batch.from_dict(await self._json(self._r_restore(prefix, to, force=force, dry_run=False,
                                                             idempotency_key=idempotency_key)))
        if wait and not b.terminal:
            return await self.wait_batch(b.id, timeout=timeout)
        return b

    async def fork(self, from_: str, to: str, *, as_of: Optional[str] = None,
                   idempotency_key: Optional[str] = None) -> Fork:
        """Copy the files under the folder ``from_`` (as of the point ``as_of``; default now) to ``to`` (POST /v1/forks).

        The copies are new files sharing their bytes: nothing is copied. A live
        file under ``to`` raises PathExistsError.
        """
        return Fork.from_dict(await self._json(self._r_create_fork(from_, to, as_of=as_of,
                                                                   idempotency_key=idempotency_key)))

    async def list_forks(self, *, limit: Optional[int] = None, cursor: Optional[str] = None) -> AsyncPage[Fork]:
        """One page of forks, newest first (GET /v1/forks)."""
        return await self._page(self._r_list_forks(limit=limit, cursor=cursor), Fork.from_dict,
                                lambda c: self.list_forks(limit=limit, cursor=c))

    async def get_fork(self, fork_id: str) -> Fork:
        """A fork by id (GET /v1/forks/{id})."""
        return Fork.from_dict(await self._json(self._r_get_fork(fork_id)))

    async def delete_fork(self, fork_id: str) -> Fork:
        """Forget a fork; its files stay (DELETE /v1/forks/{id})."""
        return Fork.from_dict(await self._json(self._r_delete_fork(fork_id)))

    async def merge(self, fork_id: str, *, on_conflict: Optional[str] = None, dry_run: bool = False,
                    idempotency_key: Optional[str] = None) -> Merge:
        """Merge a fork back into its source in one transaction (POST /v1/forks/{id}/merge).

        With conflicts and ``on_conflict`` fail (the default) it raises a
        Problem MERGE_CONFLICT whose ``conflicts`` list every one, and nothing
        is merged; ``fork`` or ``target`` picks the side that wins.
        """
        return Merge.from_dict(await self._json(self._r_merge(fork_id, on_conflict=on_conflict, dry_run=dry_run,
                                                              idempotency_key=idempotency_key)))


async def _copy(chunks: AsyncIterator[bytes], out: BinaryIO, received: Received) -> int:
    async for chunk in chunks:
        await asyncio.to_thread(out.write, chunk)
        received.add(chunk)
    return received.done()
