package handlers_test

import (
	"bytes"
	"mime/multipart"
	"net/http"
	"net/url"
	"testing"
)

// The two spellings of one name: é as one code point (NFC) and as e with
// a combining acute accent (NFD).
const (
	cafeNFC = "caf\u00e9/caf\u00e9.txt"
	cafeNFD = "cafe\u0301/cafe\u0301.txt"
)

// TestUnicodePathsAreOnePath sends the NFC and NFD spellings of a path
// through every door that takes a path: they name one file, stored in NFC.
func TestUnicodePathsAreOnePath(t *testing.T) {
	t.Run("RawUploadThenReplace", func(t *testing.T) {
		c, _ := setup(t)
		f := upload(t, c, cafeNFD, "one").Expect(t, http.StatusCreated).File(t)
		if f.Path != cafeNFC {
			t.Fatalf("stored path %q, want the NFC form %q", f.Path, cafeNFC)
		}
		again := c.Do("POST", "/v1/files?if_exists=replace&path="+url.QueryEscape(cafeNFC), "two").Expect(t, http.StatusOK).File(t)
		if again.ID != f.ID || again.Version != 2 {
			t.Fatalf("NFC replace of an NFD upload: %+v, want file %s version 2", again, f.ID)
		}
		p := upload(t, c, cafeNFC, "three").ExpectProblem(t, http.StatusConflict, "PATH_EXISTS")
		if p.ExistingFileID != f.ID {
			t.Fatalf("existing_file_id %q, want %s", p.ExistingFileID, f.ID)
		}
	})

	t.Run("KeyedRepeatInTheOtherSpellingReplays", func(t *testing.T) {
		c, _ := setup(t)
		keyed(t, c, "nfc-1", cafeNFC, "x").Expect(t, http.StatusCreated)
		res := keyed(t, c, "nfc-1", cafeNFD, "x").Expect(t, http.StatusCreated)
		if res.Header.Get("Idempotent-Replayed") != "true" {
			t.Fatal("the NFD spelling of the same request was not a replay")
		}
	})

	t.Run("Multipart", func(t *testing.T) {
		c, _ := setup(t)
		f := upload(t, c, cafeNFC, "one").Expect(t, http.StatusCreated).File(t)
		var buf bytes.Buffer
		w := multipart.NewWriter(&buf)
		_ = w.WriteField("path", cafeNFD)
		_ = w.WriteField("if_exists", "replace")
		fw, _ := w.CreateFormFile("file", "x")
		_, _ = fw.Write([]byte("two"))
		_ = w.Close()
		got := c.Do("POST", "/v1/files", &buf, "Content-Type", w.FormDataContentType()).Expect(t, http.StatusOK).File(t)
		if got.ID != f.ID || got.Path != cafeNFC {
			t.Fatalf("multipart NFD replace: %+v, want file %s at %q", got, f.ID, cafeNFC)
		}
	})

	t.Run("ListByEitherSpelling", func(t *testing.T) {
		c, _ := setup(t)
		f := upload(t, c, cafeNFC, "one").Expect(t, http.StatusCreated).File(t)
		upload(t, c, "other.txt", "two").Expect(t, http.StatusCreated)
		for _, q := range []string{
			"path=" + url.QueryEscape(cafeNFD), "path=" + url.QueryEscape(cafeNFC),
			"prefix=" + url.QueryEscape("cafe\u0301/"), "prefix=" + url.QueryEscape("caf\u00e9/"),
		} {
			if l := list(t, c, q); len(l.Data) != 1 || l.Data[0].ID != f.ID {
				t.Fatalf("list %s: %d files, want just %s", q, len(l.Data), f.ID)
			}
		}
	})

	t.Run("UploadSession", func(t *testing.T) {
		c, _ := setup(t)
		upload(t, c, cafeNFC, "one").Expect(t, http.StatusCreated)
		u := createUpload(t, c, map[string]any{"path": cafeNFD, "size_bytes": 3}, http.StatusCreated)
		putPart(t, c, u.ID, 1, []byte("two")).Expect(t, http.StatusOK)
		complete(t, c, u.ID, "").ExpectProblem(t, http.StatusConflict, "PATH_EXISTS")
		var s struct {
			Path string `json:"path"`
		}
		c.Do("GET", "/v1/uploads/"+u.ID, nil).Expect(t, http.StatusOK).JSON(t, &s)
		if s.Path != cafeNFC {
			t.Fatalf("session path %q, want the NFC form %q", s.Path, cafeNFC)
		}
	})

	t.Run("BatchPutAndCopy", func(t *testing.T) {
		c, _ := setup(t)
		f := upload(t, c, cafeNFC, "one").Expect(t, http.StatusCreated).File(t)
		b, _ := runBatch(t, c, "nfd-batch", []map[string]any{
			{"op": "put", "path": cafeNFD, "content": "two"},
			{"op": "put", "path": cafeNFD, "content": "three", "if_exists": "replace"},
			{"op": "copy", "file_id": f.ID, "path": "copy/cafe\u0301.txt"},
		}, http.StatusAccepted)
		if b.Items[0].Error == nil || b.Items[0].Error.Code != "PATH_EXISTS" {
			t.Fatalf("NFD put over an NFC file: %+v, want PATH_EXISTS", b.Items[0])
		}
		if it := b.Items[1]; it.File == nil || it.File.ID != f.ID {
			t.Fatalf("NFD replace over an NFC file: %+v, want file %s", it, f.ID)
		}
		if it := b.Items[2]; it.File == nil || it.File.Path != "copy/caf\u00e9.txt" {
			t.Fatalf("NFD copy: %+v, want a file at the NFC path", it)
		}
	})
}
