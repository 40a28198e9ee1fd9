package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"github.com/minio/minio-go/v7"
)

// contentLocation asks for a file's content with redirect=true and returns
// the presigned URL of the 307.
func (a *api) contentLocation(ctx context.Context, id string) (string, error) {
	path := "/v1/files/" + url.PathEscape(id) + "/content?redirect=true"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.base+path, nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("Authorization", "Bearer "+a.token)
	hc := *a.hc
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := hc.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 2048))
	if resp.StatusCode != http.StatusTemporaryRedirect {
		if resp.StatusCode == http.StatusOK {
			return "", errors.New("the server streamed instead of redirecting: is AGENTFS_S3_PUBLIC_ENDPOINT set (scripts/bench.sh sets it)?")
		}
		return "", &statusError{method: http.MethodGet, path: path, status: resp.StatusCode, body: string(b)}
	}
	return resp.Header.Get("Location"), nil
}

// getPresigned reads a presigned URL to the end, without the token.
func (a *api) getPresigned(ctx context.Context, u string, buf []byte) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, err
	}
	resp, err := a.hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 2048))
		return 0, fmt.Errorf("GET the presigned URL: %d %s", resp.StatusCode, b)
	}
	return drain(resp.Body, buf)
}

// redirect: one large download three ways in one run, in rotating order:
// through a redirect (GET content?redirect=true, then the presigned URL
// straight from S3), a direct GetObject, and streamed through AgentFS.
// The redirect's budget is S3's own speed: the ratio to GetObject that the
// streamed download is held to.
func (b *bench) redirect(ctx context.Context) ([]row, error) {
	c := b.cfg
	size := c.uploadSize
	f, _, err := b.api.putFile(ctx, b.path("redirect"), b.data.reader(0, size), size, nil)
	if err != nil {
		return nil, err
	}
	defer b.api.deleteFile(ctx, f.ID)
	key := b.key("redirect")
	if _, err := b.s3.PutObject(ctx, c.directBucket, key, b.data.reader(0, size), size, putOpts); err != nil {
		return nil, fmt.Errorf("direct PutObject: %w", err)
	}
	defer b.s3.RemoveObject(ctx, c.directBucket, key, minio.RemoveObjectOptions{})
	if _, err := b.api.contentLocation(ctx, f.ID); err != nil {
		return nil, err
	}
	buf := make([]byte, readBufferSize)
	var red, direct, streamed []float64
	var redCPU, directCPU, streamedCPU cpuAcc
	for i := range c.downloadRuns {
		var rr, dr, sr float64
		viaRedirect := b.timedDownload("redirected download", size, func() (int64, error) {
			loc, err := b.api.contentLocation(ctx, f.ID)
			if err != nil {
				return 0, err
			}
			return b.api.getPresigned(ctx, loc, buf)
		}, &rr, &redCPU)
		getObject := b.timedDownload("direct download", size, func() (int64, error) {
			return b.directGet(ctx, key, buf)
		}, &dr, &directCPU)
		viaAgentFS := b.timedDownload("streamed download", size, func() (int64, error) {
			return b.api.getContent(ctx, f.ID, buf)
		}, &sr, &streamedCPU)
		if err := rotate(i, viaRedirect, getObject, viaAgentFS); err != nil {
			return nil, err
		}
		logf("  redirect %s run %d/%d: redirect %.0f MiB/s, GetObject %.0f MiB/s, streamed %.0f MiB/s", fmtSize(size), i+1, c.downloadRuns, rr, dr, sr)
		red, direct, streamed = append(red, rr), append(direct, dr), append(streamed, sr)
	}
	b.cpuNote("download "+fmtSize(size)+" through a redirect (AgentFS answers the 307, S3 sends the bytes)", "GiB", redCPU, directCPU)
	b.cpuNote("download "+fmtSize(size)+" streamed through AgentFS, in the redirect line's run", "GiB", streamedCPU, directCPU)
	b.notes = append(b.notes, fmt.Sprintf("download %s in one run, medians of %d: redirect %s, GetObject %s, streamed through AgentFS %s (%s of GetObject; redirect ÷ streamed %s).",
		fmtSize(size), c.downloadRuns, fmtRate(median(red), "MiB/s"), fmtRate(median(direct), "MiB/s"),
		fmtRate(median(streamed), "MiB/s"), ratio(median(streamed), median(direct)), ratio(median(red), median(streamed))))
	return []row{withDirect(rateRow(fmt.Sprintf("download %s through a redirect vs GetObject, median of %d", fmtSize(size), c.downloadRuns),
		median(red), median(direct), "MiB/s", 0.9), "GetObject")}, nil
}

// directGet reads the object key of the direct bucket from S3 itself
// into buf, as a client that bypasses AgentFS would, and returns its size.
func (b *bench) directGet(ctx context.Context, key string, buf []byte) (int64, error) {
	obj, err := b.s3.GetObject(ctx, b.cfg.directBucket, key, minio.GetObjectOptions{})
	if err != nil {
		return 0, fmt.Errorf("direct GetObject: %w", err)
	}
	defer obj.Close()
	n, err := drain(obj, buf)
	if err != nil {
		return 0, fmt.Errorf("direct GetObject: %w", err)
	}
	return n, nil
}
