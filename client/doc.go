// Package client is the Go SDK of AgentFS, file storage for AI agents
// that is safe to retry. Every method takes a context, streams bodies, and
// retries only what cannot happen twice.
//
// # A complete example
//
// Upload a report as run "run-1", read it back, list what the run made,
// and handle the errors that mean something:
//
//	package main
//
//	import (
//		"context"
//		"errors"
//		"fmt"
//		"io"
//		"log"
//		"os"
//
//		"github.com/agentfs/agentfs/client"
//	)
//
//	func main() {
//		ctx := context.Background()
//		c, err := client.New(os.Getenv("AGENTFS_URL"), os.Getenv("AGENTFS_TOKEN"),
//			client.WithAgentID("planner"), client.WithRunID("run-1"))
//		if err != nil {
//			log.Fatal(err)
//		}
//
//		// An *os.File is an io.ReadSeeker: it streams with its length and
//		// is rewound if the upload has to be sent again.
//		local, err := os.Open("summary.md")
//		if err != nil {
//			log.Fatal(err)
//		}
//		defer local.Close()
//		// Without Replace, a live file at the path is PATH_EXISTS; with
//		// it, that file is replaced and keeps its id and url.
//		f, err := c.PutFile(ctx, "reports/summary.md", local, client.PutOptions{
//			ContentType: "text/markdown",
//		})
//		var p *client.Problem
//		switch {
//		case errors.As(err, &p) && p.Code == "PATH_EXISTS":
//			log.Fatalf("the path is taken by %s", p.ExistingFileID)
//		case err != nil:
//			log.Fatal(err) // a *client.Problem, ctx.Err(), or a network error
//		}
//		fmt.Println(f.ID, f.Version, f.URL)
//
//		content, err := c.FileContent(ctx, f.ID, client.ContentOptions{})
//		if err != nil {
//			log.Fatal(err)
//		}
//		defer content.Close()
//		if _, err := io.Copy(os.Stdout, content); err != nil {
//			log.Fatal(err)
//		}
//
//		for f, err := range c.AllFiles(ctx, client.ListOptions{RunID: "run-1"}) {
//			if err != nil {
//				log.Fatal(err)
//			}
//			fmt.Println(f.Path, f.SizeBytes)
//		}
//	}
//
// # Large files
//
// PutPath sends a local file with one POST below 64 MiB
// (PutPathOptions.Threshold) and through an upload session from there on;
// UploadFile always uses a session:
//
//	f, err := c.UploadFile(ctx, "train.parquet", "datasets/train.parquet", client.UploadOptions{
//		Replace:  true,
//		Parallel: 4, // parts sent at once
//		Progress: func(sent, total int64) { log.Printf("%d/%d", sent, total) },
//	})
//
// The content's SHA-256 is computed first (streaming, unless
// UploadOptions.SHA256 gives it; HashProgress follows that pass) and
// declared with the session, so the
// server checks the assembled file. The server chooses the part size; each
// part is read through its own io.NewSectionReader, so a retry sends it
// again whole, with its Content-Digest. An upload that failed leaves its
// session pending: the same call again resumes it, and sends only the
// parts the session lacks or holds with other bytes. CreateUpload,
// PutPart, CompleteUpload and AbortUpload are the session routes one by
// one.
//
// # Batches
//
// CreateBatch admits many small operations in one request; they run in
// order in the background, and WaitBatch polls until every item has run:
//
//	b, err := c.CreateBatch(ctx, []client.BatchOp{
//		client.BatchPut("notes/a.md", []byte("# A")),
//		client.BatchDelete("file_01jd8x2m4k9q7v3t5r6w8y0z1a"),
//	}, client.BatchOptions{IdempotencyKey: "nightly-2025-01-02"})
//	if err != nil {
//		log.Fatal(err)
//	}
//	if b, err = c.WaitBatch(ctx, b.ID); err != nil {
//		log.Fatal(err)
//	}
//	for _, it := range b.FailedItems() {
//		log.Printf("item %d: %s", it.Index, it.Error.Code) // a *Problem
//	}
//
// A batch always carries an Idempotency-Key: the same key and operations
// again return the same batch, admitted once.
//
// # History, sharing and expiry
//
// Every write that changes a file's bytes makes a version; the old ones
// stay readable. ListVersions and AllVersions list them, newest first,
// VersionContent streams one, and Revert makes an old one current again
// (as a new version). Move renames a file without touching its bytes,
// keeping its id, url and history:
//
//	for v, err := range c.AllVersions(ctx, f.ID, client.VersionListOptions{}) {
//		if err != nil {
//			log.Fatal(err)
//		}
//		fmt.Println(v.Version, v.SHA256, v.Current)
//	}
//	f, err = c.Revert(ctx, f.ID, 1, client.RevertOptions{IfMatch: f.ETag})
//	f, err = c.Move(ctx, f.ID, "reports/final.md", client.MoveOptions{})
//
// PutOptions.ExpiresIn (and UploadOptions.ExpiresIn, BatchOp.ExpiresIn)
// makes scratch output remove itself; SetExpiry changes it later, nil
// meaning never. CreateLink shares a file, or one version of it, with
// someone who has no token, through a URL shown only in its answer:
//
//	l, err := c.CreateLink(ctx, f.ID, client.LinkOptions{ExpiresIn: 24 * time.Hour})
//	fmt.Println(*l.URL) // RevokeLink(ctx, l.ID, ...) ends it
//
// ListUploads and ListBatches (AllUploads, AllBatches) find upload
// sessions left pending and batches still running; CancelBatch stops a
// batch's pending items.
//
// # The event feed
//
// Every effect on a file commits one Event with it. Events returns a page
// after a cursor; FollowEvents follows the feed for as long as you like,
// long-polling, and rides out cut connections and server restarts by
// asking again from the last cursor, so it yields every event once, in
// order. Cursor says where to resume in another process:
//
//	f := c.FollowEvents(client.EventOptions{RunID: "run-1", After: client.EventsNow}, client.FollowOptions{})
//	for e, err := range f.All(ctx) {
//		if err != nil {
//			log.Printf("%v; resume with After: %q", err, f.Cursor())
//			break
//		}
//		fmt.Println(e.Type, e.Path)
//	}
//
// Run sums up what one run did: its counts by kind of effect, the bytes
// it wrote and the files it left live; ListOptions.LastRunID lists those
// files. WriteRunArchive (or RunArchive, as a stream) fetches those files
// as one zip or tar, and RevertRun undoes the run, as a batch:
//
//	f, err := os.Create("run-1.zip")
//	n, err := c.WriteRunArchive(ctx, "run-1", f, client.ArchiveOptions{})
//	b, err := c.RevertRun(ctx, "run-1", client.RevertRunOptions{Wait: true})
//	for _, it := range b.FailedItems() {
//		fmt.Println(*it.Path, it.Error.Code) // CHANGED_SINCE_RUN: Force undoes it anyway
//	}
//
// # Errors
//
// A server error is a *Problem (RFC 9457): branch on its Code
// (PATH_EXISTS, PRECONDITION_FAILED, NOT_FOUND, ...; ErrorCode reads it
// from any error); its RequestID names the request in the server's logs.
// A cancelled context returns ctx.Err(); anything else (a refused
// connection, a response that never came) is a wrapped error.
//
// # Retries
//
// The policy is the server's (GET /v1/protocol; see RetryPolicy):
//
//   - 408, 429 and 5xx are retried, and so is a connection that failed
//     before any response when the request is safe to repeat: reads,
//     anything with an Idempotency-Key, replace uploads, deletes,
//     restores, the upload session routes (create, parts, complete,
//     abort), link revocations, batch cancels and expiry changes. No
//     other 4xx is ever retried: it would fail the same way. Revert,
//     Move and CreateLink are repeated only with their key.
//   - Every write gets one Idempotency-Key (PutOptions.IdempotencyKey, or
//     a random one) that all its attempts share, so a retry after a lost
//     response replays the first outcome instead of writing twice.
//     WithoutIdempotencyKeys turns generation off; a plain create is then
//     not repeated after a lost connection. A batch, which the server
//     admits only with a key, always gets one.
//   - Waits use full jitter, a random time up to a delay that doubles from
//     1 s to 30 s, for at most 8 attempts. Retry-After is a floor: the
//     client waits at least that long, and stops at once with the problem
//     when the hint is above RetryPolicy.MaxDelay. Cancelling the context
//     ends a wait. WithOnRetry hears of every wait, with the error that
//     caused it, so a program can say why it waits instead of falling
//     silent.
//   - OPERATION_IN_PROGRESS (another request holds the key) is answered by
//     polling GET /v1/operations/{key} after Retry-After: the recorded
//     outcome is returned, a recorded problem included. Only a 404, which
//     proves that nothing happened under the key, sends the write again,
//     and a recorded outcome that withholds a secret (a share link's url,
//     null in /v1/operations): the same key then replays it, secret and
//     all, to this token.
//     Without a key, a request that is safe to repeat (a complete or a part
//     while another request holds the upload session) is simply sent
//     again.
//   - A body is sent again only if it can be re-read: an io.ReadSeeker
//     (an *os.File, a bytes.Reader, a strings.Reader), or any reader with
//     PutOptions.GetBody. A stream that was read is sent once.
//
// Keep the key of a write you may need to repeat from another process
// (NewIdempotencyKey, or one derived from your own job id): the same key
// and request always get the first outcome, within the server's
// idempotency retention. Use each key for one request only.
package client
