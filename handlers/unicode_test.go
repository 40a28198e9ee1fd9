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

// TestJSONStringsMustBeText sends JSON bodies whose strings are not
// Unicode text, as invalid UTF-8 bytes or as \u escapes of a surrogate
// that is not half of a pair, through every JSON door: a path is
// 422 INVALID_PATH, any other string (a member name too) 422
// VALIDATION_FAILED naming the field, and nothing is written. encoding/json
// would have turned both into U+FFFD and stored another path than was sent.
func TestJSONStringsMustBeText(t *testing.T) {
	c, _ := setup(t)
	f := upload(t, c, "kept.txt", "kept").Expect(t, http.StatusCreated).File(t)
	jsonHeaders := []string{"Content-Type", "application/json"}
	for _, tc := range []struct {
		name, method, target, body, code, field string
	}{
		{"MoveToALoneSurrogate", "POST", "/v1/files/" + f.ID + "/move", `{"path":"bad/\udc80.txt"}`, "INVALID_PATH", "path"},
		{"MoveToInvalidBytes", "POST", "/v1/files/" + f.ID + "/move", "{\"path\":\"bad\xff\xfe.txt\"}", "INVALID_PATH", "path"},
		{"MoveToAHalfPair", "POST", "/v1/files/" + f.ID + "/move", `{"path":"x\ud83d.txt"}`, "INVALID_PATH", "path"},
		{"UploadSessionPath", "POST", "/v1/uploads", `{"path":"s\udfff","size_bytes":3}`, "INVALID_PATH", "path"},
		{"UploadSessionContentType", "POST", "/v1/uploads", `{"path":"s.txt","size_bytes":3,"content_type":"text/plain; x=\ud800"}`,
			"VALIDATION_FAILED", "content_type"},
		{"BatchItemPath", "POST", "/v1/batch", `{"operations":[{"op":"put","path":"ok.txt","content":"x"},{"op":"put","path":"b\udc80","content":"x"}]}`,
			"INVALID_PATH", "operations[1].path"},
		{"BatchItemContent", "POST", "/v1/batch", "{\"operations\":[{\"op\":\"put\",\"path\":\"c.txt\",\"content\":\"caf\xe9\"}]}",
			"VALIDATION_FAILED", "operations[0].content"},
		{"BatchItemContentEscape", "POST", "/v1/batch", `{"operations":[{"op":"put","path":"c.txt","content":"\udc80"}]}`,
			"VALIDATION_FAILED", "operations[0].content"},
		{"MemberName", "POST", "/v1/files/" + f.ID + "/move", "{\"pa\xffth\":\"x\"}", "VALIDATION_FAILED", "body"},
		{"LinkBody", "POST", "/v1/files/" + f.ID + "/links", "{\"note\xff\":1}", "VALIDATION_FAILED", "body"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			headers := append([]string{"Idempotency-Key", "text-" + tc.name}, jsonHeaders...)
			res := c.Do(tc.method, tc.target, tc.body, headers...)
			p := res.ExpectProblem(t, http.StatusUnprocessableEntity, tc.code)
			if len(p.Errors) != 1 || p.Errors[0].Field != tc.field {
				t.Fatalf("%s: errors %+v, want one naming %s", tc.body, p.Errors, tc.field)
			}
		})
	}
	if l := list(t, c, "include_deleted=true"); len(l.Data) != 1 || l.Data[0].Path != "kept.txt" {
		t.Fatalf("refused bodies changed the files: %+v", l.Data)
	}
	// A pair is one character, and a move to it is a move.
	if got := move(c, f.ID, "\U0001F600.txt", "").Expect(t, http.StatusOK).File(t); got.Path != "\U0001F600.txt" {
		t.Fatalf("moved to %q", got.Path)
	}
	if got := c.Do("POST", "/v1/files/"+f.ID+"/move", `{"path":"\ud83d\ude00/x.txt"}`, jsonHeaders...).Expect(t, http.StatusOK).File(t); got.Path != "\U0001F600/x.txt" {
		t.Fatalf("moved to %q by escapes", got.Path)
	}
}

// TestPathsReadAsTheyAre: a path holding a right-to-left override or an
// invisible character is 422 INVALID_PATH at every door that takes one (a
// listing's prefix, a filter, is 422 VALIDATION_FAILED); a joiner that
// spelling needs is kept.
func TestPathsReadAsTheyAre(t *testing.T) {
	c, _ := setup(t)
	f := upload(t, c, "plain.txt", "x").Expect(t, http.StatusCreated).File(t)
	for _, bad := range []string{"invoice\u202etxt.exe", "a\u200bb.txt", "\ufeffbom.txt", "a\u200db.txt"} {
		upload(t, c, bad, "x").ExpectProblem(t, http.StatusUnprocessableEntity, "INVALID_PATH")
		move(c, f.ID, bad, "").ExpectProblem(t, http.StatusUnprocessableEntity, "INVALID_PATH")
		c.Do("GET", "/v1/files?path="+url.QueryEscape(bad), nil).ExpectProblem(t, http.StatusUnprocessableEntity, "INVALID_PATH")
		c.Do("GET", "/v1/files?prefix="+url.QueryEscape(bad), nil).ExpectProblem(t, http.StatusUnprocessableEntity, "VALIDATION_FAILED")
	}
	persian := "\u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645.txt"
	if got := upload(t, c, persian, "x").Expect(t, http.StatusCreated).File(t); got.Path != persian {
		t.Fatalf("stored %q, want %q", got.Path, persian)
	}
}
