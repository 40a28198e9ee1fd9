package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"
)

// TestCrashMidComplete kills the server that runs a complete after it has
// assembled the session and before it commits: another instance answers a
// complete OPERATION_IN_PROGRESS with a Retry-After no longer than what is
// left of the dead complete's lease, then takes the session over within
// that lease and makes exactly one file of the right bytes.
func TestCrashMidComplete(t *testing.T) {
	const lease = 3 // seconds, AGENTFS_UPLOAD_COMPLETE_LEASE of both servers
	cb := setupCrash(t, "AGENTFS_FAULT_MID_COMPLETE=exit")
	data := bytes.Repeat([]byte("0123456789abcdef"), (8<<20+64<<10)/16) // two parts of the default 8 MiB
	sum := sha256.Sum256(data)
	a := cb.client(t, cb.a)
	raw, _ := json.Marshal(map[string]any{"path": "assembled.bin", "size_bytes": len(data)})
	var u struct {
		ID       string `json:"id"`
		PartSize int    `json:"part_size"`
	}
	a.Do("POST", "/v1/uploads", raw, "Content-Type", "application/json").Expect(t, http.StatusCreated).JSON(t, &u)
	// Last part first: the running hash cannot cover the content, so the
	// complete reads it back, as a slow complete does.
	a.Do("PUT", fmt.Sprintf("/v1/uploads/%s/parts/2", u.ID), data[u.PartSize:]).Expect(t, http.StatusOK)
	a.Do("PUT", fmt.Sprintf("/v1/uploads/%s/parts/1", u.ID), data[:u.PartSize]).Expect(t, http.StatusOK)

	req, _ := http.NewRequest("POST", cb.a.url+"/v1/uploads/"+u.ID+"/complete", nil)
	cb.crashA(t, req)

	b := cb.client(t, cb.b)
	waited := 0 // seconds, as the server's Retry-After told
	for {
		res := b.Do("POST", "/v1/uploads/"+u.ID+"/complete", nil)
		if res.Status != http.StatusConflict {
			f := res.Expect(t, http.StatusCreated).File(t)
			if f.SHA256 != hex.EncodeToString(sum[:]) {
				t.Fatalf("sha256 %s", f.SHA256)
			}
			break
		}
		if code := res.Problem(t).Code; code != "OPERATION_IN_PROGRESS" {
			t.Fatalf("409 %s", code)
		}
		secs, err := strconv.Atoi(res.Header.Get("Retry-After"))
		if err != nil || secs < 1 || secs > lease {
			t.Fatalf("Retry-After %q, want 1 to %d (what is left of the dead complete's lease)", res.Header.Get("Retry-After"), lease)
		}
		if waited += secs; waited > lease {
			t.Fatalf("still in progress after the %d s the server asked to wait: the dead complete holds the session past its lease", waited)
		}
		// The wait under test is the server's own Retry-After, as a client
		// honours it: the session must be free once it has passed.
		time.Sleep(time.Duration(secs) * time.Second)
	}
	files := cb.files(t)
	if len(files) != 1 || files[0].Path != "assembled.bin" {
		t.Fatalf("files: %+v", files)
	}
	content := b.Do("GET", "/v1/files/"+files[0].ID+"/content", nil).Expect(t, http.StatusOK)
	if !bytes.Equal(content.Body, data) {
		t.Fatal("the file's bytes differ from the parts sent")
	}
	var got struct{ Status string }
	b.Do("GET", "/v1/uploads/"+u.ID, nil).Expect(t, http.StatusOK).JSON(t, &got)
	if got.Status != "completed" {
		t.Fatalf("session %s", got.Status)
	}
}
