package handlers_test

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"net/http"
	"testing"
)

func TestContent(t *testing.T) {
	c, _ := setup(t)
	f := upload(t, c, "dir/report final.txt", "0123456789", "Content-Type", "text/plain; charset=utf-8").Expect(t, 201).File(t)
	content := "/v1/files/" + f.ID + "/content"

	t.Run("Headers", func(t *testing.T) {
		res := c.Do("GET", content, nil).Expect(t, http.StatusOK)
		want := map[string]string{
			"ETag":                f.ETag,
			"Accept-Ranges":       "bytes",
			"Content-Type":        "text/plain; charset=utf-8",
			"Content-Length":      "10",
			"Content-Disposition": `attachment; filename="report final.txt"`,
			"Repr-Digest":         digestHeader("0123456789"),
		}
		for k, v := range want {
			if got := res.Header.Get(k); got != v {
				t.Errorf("%s: %q, want %q", k, got, v)
			}
		}
	})

	t.Run("Ranges", func(t *testing.T) {
		for _, tc := range []struct {
			rng, body, contentRange string
			status                  int
		}{
			{"bytes=0-3", "0123", "bytes 0-3/10", 206},
			{"bytes=7-", "789", "bytes 7-9/10", 206},
			{"bytes=-2", "89", "bytes 8-9/10", 206},
			{"bytes=5-100", "56789", "bytes 5-9/10", 206},
			{"bytes=0-1,4-5", "0123456789", "", 200},
			{"items=0-1", "0123456789", "", 200},
		} {
			res := c.Do("GET", content, nil, "Range", tc.rng).Expect(t, tc.status)
			if string(res.Body) != tc.body || res.Header.Get("Content-Range") != tc.contentRange {
				t.Errorf("%s: body %q Content-Range %q", tc.rng, res.Body, res.Header.Get("Content-Range"))
			}
		}
		res := c.Do("GET", content, nil, "Range", "bytes=10-")
		res.ExpectProblem(t, http.StatusRequestedRangeNotSatisfiable, "RANGE_NOT_SATISFIABLE")
		if res.Header.Get("Content-Range") != "bytes */10" {
			t.Errorf("416 Content-Range %q", res.Header.Get("Content-Range"))
		}
		stale := c.Do("GET", content, nil, "Range", "bytes=0-1", "If-Range", `"stale"`).Expect(t, http.StatusOK)
		if len(stale.Body) != 10 {
			t.Errorf("If-Range with a stale etag must send the whole content, got %q", stale.Body)
		}
		c.Do("GET", content, nil, "Range", "bytes=0-1", "If-Range", f.ETag).Expect(t, http.StatusPartialContent)
	})

	t.Run("Conditional", func(t *testing.T) {
		res := c.Do("GET", content, nil, "If-None-Match", f.ETag).Expect(t, http.StatusNotModified)
		if len(res.Body) != 0 || res.Header.Get("ETag") != f.ETag {
			t.Fatalf("304: body %q ETag %q", res.Body, res.Header.Get("ETag"))
		}
		c.Do("GET", content, nil, "If-None-Match", `"other"`).Expect(t, http.StatusOK)
		c.Do("GET", "/v1/files/"+f.ID, nil, "If-None-Match", f.ETag).Expect(t, http.StatusNotModified)
		// If-None-Match compares weakly (RFC 9110 §13.1.2): a cache that
		// holds W/"etag" is told 304 too.
		c.Do("GET", content, nil, "If-None-Match", "W/"+f.ETag).Expect(t, http.StatusNotModified)
		c.Do("GET", "/v1/files/"+f.ID, nil, "If-None-Match", "W/"+f.ETag).Expect(t, http.StatusNotModified)
		c.Do("HEAD", content, nil, "If-None-Match", `"x", W/`+f.ETag).Expect(t, http.StatusNotModified)
		c.Do("GET", content, nil, "If-None-Match", `W/"other"`).Expect(t, http.StatusOK)
	})

	t.Run("Head", func(t *testing.T) {
		res := c.Do("HEAD", content, nil).Expect(t, http.StatusOK)
		if len(res.Body) != 0 || res.Header.Get("Content-Length") != "10" || res.Header.Get("ETag") != f.ETag {
			t.Fatalf("HEAD content: %v", res.Header)
		}
		meta := c.Do("HEAD", "/v1/files/"+f.ID, nil).Expect(t, http.StatusOK)
		if len(meta.Body) != 0 || meta.Header.Get("ETag") != f.ETag {
			t.Fatalf("HEAD metadata: %v", meta.Header)
		}
		c.Do("HEAD", "/v1/files/file_nope", nil).Expect(t, http.StatusNotFound)
	})
}

// TestLargeContent reads content big enough to come from S3 over a
// connection of its own and be spliced to the client: whole, ranged, and a
// small range that takes the ordinary path.
func TestLargeContent(t *testing.T) {
	c, _ := setup(t)
	data := make([]byte, 12<<20+123)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	f := c.Do("POST", "/v1/files?path=big.bin", data).Expect(t, http.StatusCreated).File(t)
	content := "/v1/files/" + f.ID + "/content"
	if got := c.Do("GET", content, nil).Expect(t, http.StatusOK).Body; !bytes.Equal(got, data) {
		t.Fatalf("whole content differs: %d bytes, want %d", len(got), len(data))
	}
	for _, tc := range []struct{ start, end int }{
		{1000, 1000 + 6<<20 - 1},
		{len(data) - 5<<20, len(data) - 1},
		{4 << 20, 4<<20 + 1023},
	} {
		hdr := fmt.Sprintf("bytes=%d-%d", tc.start, tc.end)
		res := c.Do("GET", content, nil, "Range", hdr).Expect(t, http.StatusPartialContent)
		if !bytes.Equal(res.Body, data[tc.start:tc.end+1]) {
			t.Errorf("%s: %d bytes that differ from the stored range", hdr, len(res.Body))
		}
	}
}
