package handlers_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/agentfs/agentfs/handlers/apitest"
	"github.com/agentfs/agentfs/internal/testkit"
	"github.com/agentfs/agentfs/storage/storagetest"
)

// runResult is a run revert's batch as tests read it.
type runResult struct {
	ID     string `json:"id"`
	Status string `json:"status"`
	Counts struct {
		Total, Succeeded, Failed int
	} `json:"counts"`
	Items []struct {
		Op     string           `json:"op"`
		Path   *string          `json:"path"`
		Status string           `json:"status"`
		Error  *apitest.Problem `json:"error"`
	} `json:"items"`
}

// revertRun undoes runID and waits for its batch to end.
func revertRun(t *testing.T, c *apitest.Client, runID, key string, force bool, headers ...string) runResult {
	t.Helper()
	body, _ := json.Marshal(map[string]bool{"force": force})
	res := c.Do("POST", "/v1/runs/"+runID+"/revert", body,
		append([]string{"Content-Type", "application/json", "Idempotency-Key", key}, headers...)...).Expect(t, http.StatusAccepted)
	var b runResult
	res.JSON(t, &b)
	storagetest.Eventually(t, 30*time.Second, "the run revert to end", func() bool {
		b = runResult{}
		c.Do("GET", "/v1/batch/"+batchID(res), nil).Expect(t, http.StatusOK).JSON(t, &b)
		return b.Status != "queued" && b.Status != "running"
	})
	return b
}

func batchID(res *apitest.Response) string {
	var b struct{ ID string }
	_ = json.Unmarshal(res.Body, &b)
	return b.ID
}

// content reads the live file at path, or "" when there is none.
func content(t *testing.T, c *apitest.Client, path string) string {
	t.Helper()
	l := list(t, c, "path="+path)
	if len(l.Data) == 0 {
		return ""
	}
	return string(c.Do("GET", "/v1/files/"+l.Data[0].ID+"/content", nil).Expect(t, http.StatusOK).Body)
}

func TestRunRevert(t *testing.T) {
	t.Run("UndoesEveryKindOfEffectAndCanBeUndoneInTurn", func(t *testing.T) {
		c, _ := setup(t)
		before := func(path, body string) apitest.File {
			return upload(t, c, path, body, "X-Run-ID", "setup").Expect(t, http.StatusCreated).File(t)
		}
		replaced, deleted, moved := before("r.txt", "original"), before("d.txt", "keep me"), before("m.txt", "moving")
		run := []string{"X-Run-ID", "bad-run"}
		upload(t, c, "new.txt", "made by the run", run...).Expect(t, http.StatusCreated)
		c.Do("POST", "/v1/files?path=r.txt&if_exists=replace", "overwritten", run...).Expect(t, http.StatusOK)
		c.Do("POST", "/v1/files?path=r.txt&if_exists=replace", "overwritten twice", run...).Expect(t, http.StatusOK)
		c.Do("DELETE", "/v1/files/"+deleted.ID, nil, run...).Expect(t, http.StatusOK)
		c.Do("POST", "/v1/files/"+moved.ID+"/move", `{"path":"moved/away.txt"}`,
			append([]string{"Content-Type", "application/json"}, run...)...).Expect(t, http.StatusOK)

		b := revertRun(t, c, "bad-run", "undo-1", false, "X-Run-ID", "undo-run")
		if b.Status != "succeeded" || b.Counts.Total != 4 {
			t.Fatalf("revert batch: %+v", b)
		}
		for path, want := range map[string]string{"new.txt": "", "r.txt": "original", "d.txt": "keep me",
			"m.txt": "moving", "moved/away.txt": ""} {
			if got := content(t, c, path); got != want {
				t.Errorf("%s holds %q after the revert, want %q", path, got, want)
			}
		}
		if f := c.Do("GET", "/v1/files/"+replaced.ID, nil).Expect(t, http.StatusOK).File(t); f.Version != 4 {
			t.Errorf("the reverted file is at version %d, want 4 (a new version with the old content)", f.Version)
		}
		// The revert's own events carry its run id: reverting it redoes the run.
		var undo struct{ Counts map[string]int }
		c.Do("GET", "/v1/runs/undo-run", nil).Expect(t, http.StatusOK).JSON(t, &undo)
		if undo.Counts["deleted"] != 1 || undo.Counts["restored"] != 1 || undo.Counts["moved"] != 1 || undo.Counts["reverted"] != 1 {
			t.Fatalf("the revert's run: %+v", undo)
		}
		again := revertRun(t, c, "undo-run", "undo-2", false)
		if again.Status != "succeeded" {
			t.Fatalf("reverting the revert: %+v", again)
		}
		for path, want := range map[string]string{"new.txt": "made by the run", "r.txt": "overwritten twice",
			"d.txt": "", "m.txt": "", "moved/away.txt": "moving"} {
			if got := content(t, c, path); got != want {
				t.Errorf("%s holds %q after reverting the revert, want %q", path, got, want)
			}
		}
	})

	t.Run("RevertingARevertedRunAgainChangesNothing", func(t *testing.T) {
		c, _ := setup(t)
		upload(t, c, "kept.txt", "before", "X-Run-ID", "setup").Expect(t, http.StatusCreated)
		gone := upload(t, c, "gone.txt", "before", "X-Run-ID", "setup").Expect(t, http.StatusCreated).File(t)
		run := []string{"X-Run-ID", "twice"}
		upload(t, c, "made.txt", "by the run", run...).Expect(t, http.StatusCreated)
		c.Do("POST", "/v1/files?path=kept.txt&if_exists=replace", "by the run", run...).Expect(t, http.StatusOK)
		c.Do("DELETE", "/v1/files/"+gone.ID, nil, run...).Expect(t, http.StatusOK)
		if b := revertRun(t, c, "twice", "first", false, "X-Run-ID", "undo-first"); b.Status != "succeeded" {
			t.Fatalf("first revert: %+v", b)
		}
		// Without force: the files the first revert put back are not
		// "changed since the run" by someone else, they are already undone.
		b := revertRun(t, c, "twice", "second", false, "X-Run-ID", "undo-second")
		if b.Status != "succeeded" || b.Counts.Succeeded != 3 {
			t.Fatalf("second revert: %+v", b)
		}
		for path, want := range map[string]string{"made.txt": "", "kept.txt": "before", "gone.txt": "before"} {
			if got := content(t, c, path); got != want {
				t.Errorf("%s holds %q, want %q", path, got, want)
			}
		}
		c.Do("GET", "/v1/runs/undo-second", nil).ExpectProblem(t, http.StatusNotFound, "NOT_FOUND") // no event: no effect
	})

	t.Run("AFileAnotherRunChangedFailsUnlessForced", func(t *testing.T) {
		c, _ := setup(t)
		upload(t, c, "x.txt", "v1").Expect(t, http.StatusCreated)
		c.Do("POST", "/v1/files?path=x.txt&if_exists=replace", "by the run", "X-Run-ID", "r1").Expect(t, http.StatusOK)
		c.Do("POST", "/v1/files?path=x.txt&if_exists=replace", "by another", "X-Run-ID", "r2").Expect(t, http.StatusOK)
		b := revertRun(t, c, "r1", "undo-r1", false)
		if b.Status != "failed" || b.Items[0].Error == nil || b.Items[0].Error.Code != "CHANGED_SINCE_RUN" {
			t.Fatalf("revert over another run's change: %+v", b)
		}
		if got := content(t, c, "x.txt"); got != "by another" {
			t.Fatalf("a refused undo changed the file: %q", got)
		}
		if b := revertRun(t, c, "r1", "undo-r1-force", true); b.Status != "succeeded" || content(t, c, "x.txt") != "v1" {
			t.Fatalf("forced revert: %+v, %q", b, content(t, c, "x.txt"))
		}
	})

	t.Run("RefusesWithoutAKeyAndAnUnknownRun", func(t *testing.T) {
		c, _ := setup(t)
		c.Do("POST", "/v1/runs/nobody/revert", `{}`, "Content-Type", "application/json").
			ExpectProblem(t, http.StatusBadRequest, "IDEMPOTENCY_KEY_REQUIRED")
		c.Do("POST", "/v1/runs/nobody/revert", `{}`, "Content-Type", "application/json", "Idempotency-Key", "k").
			ExpectProblem(t, http.StatusNotFound, "NOT_FOUND")
		c.Do("POST", "/v1/runs/no%20spaces/revert", `{}`, "Content-Type", "application/json", "Idempotency-Key", "k2").
			ExpectProblem(t, http.StatusUnprocessableEntity, "VALIDATION_FAILED")
	})

	t.Run("ARepeatAnswersTheSameBatch", func(t *testing.T) {
		c, _ := setup(t)
		upload(t, c, "y.txt", "y", "X-Run-ID", "r").Expect(t, http.StatusCreated)
		first := c.Do("POST", "/v1/runs/r/revert", `{}`, "Content-Type", "application/json", "Idempotency-Key", "same").
			Expect(t, http.StatusAccepted)
		again := c.Do("POST", "/v1/runs/r/revert", `{}`, "Content-Type", "application/json", "Idempotency-Key", "same").
			Expect(t, http.StatusOK)
		if batchID(first) != batchID(again) || again.Header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("a repeat made another batch: %s then %s", batchID(first), batchID(again))
		}
	})
}

func TestRunArchive(t *testing.T) {
	c, _ := setup(t)
	run := []string{"X-Run-ID", "arch"}
	files := map[string]string{"a.txt": "alpha", "dir/b.bin": strings.Repeat("b", 3<<20), "empty": ""}
	for path, body := range files {
		upload(t, c, path, body, run...).Expect(t, http.StatusCreated)
	}
	upload(t, c, "other.txt", "not the run's", "X-Run-ID", "other").Expect(t, http.StatusCreated)
	gone := upload(t, c, "gone.txt", "deleted", run...).Expect(t, http.StatusCreated).File(t)
	c.Do("DELETE", "/v1/files/"+gone.ID, nil).Expect(t, http.StatusOK)
	// A file the run last wrote counts, whoever created it.
	upload(t, c, "shared.txt", "v1", "X-Run-ID", "other").Expect(t, http.StatusCreated)
	c.Do("POST", "/v1/files?path=shared.txt&if_exists=replace", "by arch", run...).Expect(t, http.StatusOK)
	files["shared.txt"] = "by arch"

	t.Run("Zip", func(t *testing.T) {
		res := c.Do("GET", "/v1/runs/arch/archive?format=zip", nil).Expect(t, http.StatusOK)
		if res.Header.Get("Content-Type") != "application/zip" || !strings.HasPrefix(res.Header.Get("Content-Disposition"), "attachment") {
			t.Fatalf("headers: %v", res.Header)
		}
		sameFiles(t, testkit.Unzip(t, res.Body), files)
	})

	t.Run("Tar", func(t *testing.T) {
		res := c.Do("GET", "/v1/runs/arch/archive?format=tar", nil).Expect(t, http.StatusOK)
		sameFiles(t, testkit.Untar(t, bytes.NewReader(res.Body)), files)
	})

	t.Run("BadFormatAndUnknownRun", func(t *testing.T) {
		c.Do("GET", "/v1/runs/arch/archive?format=rar", nil).ExpectProblem(t, http.StatusUnprocessableEntity, "VALIDATION_FAILED")
		c.Do("GET", "/v1/runs/nobody/archive", nil).ExpectProblem(t, http.StatusNotFound, "NOT_FOUND")
	})
}

func sameFiles(t *testing.T, got, want map[string]string) {
	t.Helper()
	names := func(m map[string]string) []string {
		var out []string
		for k := range m {
			out = append(out, k)
		}
		sort.Strings(out)
		return out
	}
	if strings.Join(names(got), ",") != strings.Join(names(want), ",") {
		t.Fatalf("archive holds %v, want %v", names(got), names(want))
	}
	for name, body := range want {
		if got[name] != body {
			t.Errorf("%s: %d bytes, want %d", name, len(got[name]), len(body))
		}
	}
}
