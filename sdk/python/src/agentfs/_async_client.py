"""The asyncio client: the same methods as Client, awaited."""

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
    check_upload_options,
    completed_file,
    destination_file,
    links_of,
    page_of,
    problem_of,
)
from ._errors import PayloadTooLargeError
from ._events import AsyncEventFollower
from ._models import (
    AsyncPage,
    Batch,
    BatchOp,
    EventPage,
    File,
    FileVersion,
    Link,
    Operation,
    Protocol,
    Run,
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
    check_plan,
    check_stored,
    counted_section,
    part_jobs,
    sha256_of_file,
)

T = TypeVar("T")


class AsyncContent(ContentInfo):
    """A file's bytes as they stream from the server. Close it (or use ``async with``) when done."""

    def __init__(self, response: httpx.Response) -> None:
        super().__init__(response)
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
    """The asyncio twin of Client: same arguments, same policy, methods awaited.

    ``sleep`` is an async function (asyncio.sleep by default); cancelling the
    task interrupts a retry wait.
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
        return (await self._run(req)).json()

    async def _page(self, req: Request, parse: Callable[[Mapping[str, Any]], T],
                    fetch: Callable[[str], Awaitable[AsyncPage[T]]]) -> AsyncPage[T]:
        """The first page of a listing; fetch(cursor) gets the next."""
        return page_of(await self._json(req), parse, fetch, AsyncPage)

    # Protocol and operations.

    async def protocol(self) -> Protocol:
        """What the server guarantees (GET /v1/protocol)."""
        return Protocol.from_dict(await self._json(self._r_protocol()))

    async def get_operation(self, key: str) -> Operation:
        """What an Idempotency-Key holds (GET /v1/operations/{key}); NotFoundError: nothing happened under it."""
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
    ) -> File:
        """Upload content as the file at path (POST /v1/files); see Client.put_file.

        content may also be an async iterator of bytes (sent once).
        """
        return File.from_dict(await self._json(self._r_put_file(
            path, content, if_exists=if_exists, if_match=if_match, if_none_match=if_none_match,
            content_type=content_type, sha256=sha256, size=size, idempotency_key=idempotency_key,
            agent_id=agent_id, run_id=run_id, expires_in=expires_in)))

    async def get_file(self, file_id: str) -> File:
        """A file's metadata (GET /v1/files/{id})."""
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
    ) -> AsyncPage[File]:
        """One page of files, newest first; ``async for`` over it walks every page."""
        req = self._r_list_files(run_id=run_id, agent_id=agent_id, prefix=prefix, path=path,
                                 include_deleted=include_deleted, limit=limit, cursor=cursor)
        return await self._page(req, File.from_dict, lambda c: self.list_files(
            run_id=run_id, agent_id=agent_id, prefix=prefix, path=path, include_deleted=include_deleted, limit=limit,
            cursor=c))

    async def file_content(
        self,
        file_id: str,
        *,
        range: Optional[str] = None,
        if_range: Optional[str] = None,
        if_none_match: Optional[str] = None,
    ) -> AsyncContent:
        """Open a live file's bytes as a stream; close it when done. See Client.file_content."""
        reply = await self._run(
            self._r_content(file_id, range=range, if_range=if_range, if_none_match=if_none_match), stream=True)
        return AsyncContent(reply.stream)

    async def download_file(self, file_id: str, destination: Union[str, os.PathLike[str], BinaryIO], *,
                            verify: bool = True) -> int:
        """Stream a live file's bytes to a local path (written whole or not at all) or a binary file."""
        async with await self.file_content(file_id) as content:
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
        """Soft-delete a file; safe to repeat."""
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
        """Undo a delete; PathExistsError if another file took the path."""
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
        """Start an upload session, or get back the live matching one with its parts."""
        return Upload.from_dict(await self._json(self._r_create_upload(
            path, size_bytes, content_type=content_type, if_exists=if_exists, sha256=sha256,
            idempotency_key=idempotency_key, agent_id=agent_id, run_id=run_id, expires_in=expires_in)))

    async def get_upload(self, upload_id: str) -> Upload:
        """A session with the parts received so far."""
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
        """Store one part of a pending session; see Client.upload_part."""
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
        """Assemble the session's parts into its file; see Client.complete_upload."""
        reply = await self._run(self._r_complete_upload(
            upload_id, if_exists=if_exists, sha256=sha256, if_match=if_match, idempotency_key=idempotency_key,
            agent_id=agent_id, run_id=run_id))
        if reply.status != 202:
            return File.from_dict(reply.json())
        u = Upload.from_dict(reply.json())
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
        """Abort a session; repeating it is safe."""
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
        """Upload a local file, through a resumable session with parallel parts when large.

        See Client.upload_file; the parts go as ``parallel`` asyncio tasks.
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
        jobs = iter(part_jobs(u))

        async def worker() -> None:
            for job in jobs:  # shared: each job goes to one worker
                await self._send_part(u.id, path, job, prog, attribution)

        tasks = [asyncio.create_task(worker()) for _ in range(max(1, min(parallel, u.part_count)))]
        try:
            await asyncio.gather(*tasks)
        except BaseException:
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise

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
        """Admit operations as one batch; see Client.create_batch."""
        return Batch.from_dict(await self._json(self._r_create_batch(
            operations, idempotency_key=idempotency_key, wait=wait, agent_id=agent_id, run_id=run_id)))

    async def get_batch(self, batch_id: str) -> Batch:
        """A batch with every item's outcome so far."""
        return Batch.from_dict(await self._json(self._r_get_batch(batch_id)))

    async def wait_batch(self, batch_id: str, *, timeout: Optional[float] = None) -> Batch:
        """Poll a batch until it is terminal; TimeoutError after ``timeout`` seconds."""
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
        """One page of batches, newest first, without their items; ``async for`` walks every page."""
        return await self._page(self._r_list_batches(status=status, limit=limit, cursor=cursor), Batch.from_dict,
                                lambda c: self.list_batches(status=status, limit=limit, cursor=c))

    async def cancel_batch(self, batch_id: str, *, idempotency_key: Optional[str] = None,
                           agent_id: Any = NOT_GIVEN, run_id: Any = NOT_GIVEN) -> Batch:
        """Cancel a batch's pending items; see Client.cancel_batch."""
        return Batch.from_dict(await self._json(self._r_cancel_batch(
            batch_id, idempotency_key=idempotency_key, agent_id=agent_id, run_id=run_id)))

    async def list_uploads(self, *, status: Optional[str] = None, path: Optional[str] = None,
                           limit: Optional[int] = None, cursor: Optional[str] = None) -> AsyncPage[Upload]:
        """One page of upload sessions, newest first; ``async for`` walks every page."""
        return await self._page(self._r_list_uploads(status=status, path=path, limit=limit, cursor=cursor),
                                Upload.from_dict, lambda c: self.list_uploads(status=status, path=path, limit=limit,
                                                                              cursor=c))

    # File history and lifecycle.

    async def list_versions(self, file_id: str, *, limit: Optional[int] = None,
                            cursor: Optional[str] = None) -> AsyncPage[FileVersion]:
        """One page of a file's versions, newest first; ``async for`` walks every page."""
        return await self._page(self._r_list_versions(file_id, limit=limit, cursor=cursor), FileVersion.from_dict,
                                lambda c: self.list_versions(file_id, limit=limit, cursor=c))

    async def get_version(self, file_id: str, version: int) -> FileVersion:
        """One version of a file."""
        return FileVersion.from_dict(await self._json(self._r_get_version(file_id, version)))

    async def version_content(self, file_id: str, version: int, *, range: Optional[str] = None,
                              if_range: Optional[str] = None, if_none_match: Optional[str] = None) -> AsyncContent:
        """Open the bytes of one version, as file_content does."""
        reply = await self._run(self._r_version_content(file_id, version, range=range, if_range=if_range,
                                                        if_none_match=if_none_match), stream=True)
        return AsyncContent(reply.stream)

    async def revert_file(self, file_id: str, version: int, *, if_match: Optional[str] = None,
                          idempotency_key: Optional[str] = None, agent_id: Any = NOT_GIVEN,
                          run_id: Any = NOT_GIVEN) -> File:
        """Make one version's content current, as a new version; see Client.revert_file."""
        return File.from_dict(await self._json(self._r_revert_file(
            file_id, version, if_match=if_match, idempotency_key=idempotency_key, agent_id=agent_id, run_id=run_id)))

    async def move_file(self, file_id: str, path: str, *, if_exists: Optional[str] = None,
                        if_match: Optional[str] = None, idempotency_key: Optional[str] = None,
                        agent_id: Any = NOT_GIVEN, run_id: Any = NOT_GIVEN) -> File:
        """Give a file a new path; see Client.move_file."""
        return File.from_dict(await self._json(self._r_move_file(
            file_id, path, if_exists=if_exists, if_match=if_match, idempotency_key=idempotency_key,
            agent_id=agent_id, run_id=run_id)))

    async def set_expiry(self, file_id: str, expires_at: Optional[datetime], *, if_match: Optional[str] = None,
                         idempotency_key: Optional[str] = None, agent_id: Any = NOT_GIVEN,
                         run_id: Any = NOT_GIVEN) -> File:
        """Make a live file expire at expires_at, or never with None; see Client.set_expiry."""
        return File.from_dict(await self._json(self._r_set_expiry(
            file_id, expires_at, if_match=if_match, idempotency_key=idempotency_key, agent_id=agent_id,
            run_id=run_id)))

    async def create_link(self, file_id: str, *, expires_in: Union[int, float, timedelta, None] = None,
                          version: Optional[int] = None, idempotency_key: Optional[str] = None,
                          agent_id: Any = NOT_GIVEN, run_id: Any = NOT_GIVEN) -> Link:
        """A share link to a file; its url is shown only in this answer. See Client.create_link."""
        return Link.from_dict(await self._json(self._r_create_link(
            file_id, expires_in=expires_in, version=version, idempotency_key=idempotency_key, agent_id=agent_id,
            run_id=run_id)))

    async def links(self, file_id: str) -> list[Link]:
        """A file's links, newest first, without their URLs."""
        return links_of(await self._json(self._r_links(file_id)))

    async def revoke_link(self, link_id: str, *, idempotency_key: Optional[str] = None,
                          agent_id: Any = NOT_GIVEN, run_id: Any = NOT_GIVEN) -> Link:
        """Revoke a share link; safe to repeat."""
        return Link.from_dict(await self._json(self._r_revoke_link(
            link_id, idempotency_key=idempotency_key, agent_id=agent_id, run_id=run_id)))

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
        """One page of your events, oldest first; see Client.events."""
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
        """Follow the events that match, from ``after`` on; ``async for`` yields them as they commit.

        See Client.follow_events. Cancelling the iterating task or ``await
        follower.aclose()`` stops it::

            async with client.follow_events(run_id="run-1", after="now") as events:
                async for e in events:
                    print(e.type, e.path)
        """
        return AsyncEventFollower(self, self._follow_state(
            after=after, run_id=run_id, agent_id=agent_id, file_id=file_id, prefix=prefix, types=types, limit=limit,
            wait=wait))

    async def run(self, run_id: str) -> Run:
        """What one run did; see Client.run."""
        return Run.from_dict(await self._json(self._r_run(run_id)))

    async def run_archive(
        self,
        run_id: str,
        destination: Union[str, os.PathLike[str], BinaryIO],
        *,
        format: Optional[str] = None,
        progress: Optional[ArchiveProgress] = None,
    ) -> int:
        """Download a run's live files as one zip or tar; returns its size. See Client.run_archive."""
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
        """Undo what a run did, as a batch; see Client.revert_run."""
        b = Batch.from_dict(await self._json(self._r_revert_run(
            run_id, force=force, idempotency_key=idempotency_key, agent_id=NOT_GIVEN, run_id_header=NOT_GIVEN)))
        if wait and not b.terminal:
            return await self.wait_batch(b.id, timeout=timeout)
        return b


async def _copy(chunks: AsyncIterator[bytes], out: BinaryIO, received: Received) -> int:
    async for chunk in chunks:
        await asyncio.to_thread(out.write, chunk)
        received.add(chunk)
    return received.done()
