package handlers_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/agentfs/agentfs/api"
	"github.com/agentfs/agentfs/handlers/apitest"
)

// parallel runs n calls of fn at once and waits for them all.
func parallel(n int, fn func(i int)) {
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			fn(i)
		}()
	}
	close(start)
	wg.Wait()
}

// fileOf decodes a File without failing from another goroutine.
func fileOf(res *apitest.Response) (apitest.File, error) {
	var f apitest.File
	err := json.Unmarshal(res.Body, &f)
	return f, err
}

func TestHistoryRaces(t *testing.T) {
	t.Run("ReplacesAndRevertsLoseNoVersion", func(t *testing.T) {
		c, b := setup(t)
		f := upload(t, c, "race.txt", "base").Expect(t, 201).File(t)
		c.Do("POST", "/v1/files?path=race.txt&if_exists=replace", "second").Expect(t, 200)
		const n = 8
		results := make([]*apitest.Response, n)
		parallel(n, func(i int) {
			if i%2 == 0 {
				results[i] = c.Do("POST", "/v1/files?path=race.txt&if_exists=replace", "writer-"+strconv.Itoa(i))
			} else {
				results[i] = revert(c, f.ID, 1)
			}
		})
		named := map[int64]string{} // version -> sha256, as the answers name them
		for i, res := range results {
			if res.Status != http.StatusOK {
				t.Fatalf("request %d: %d %s", i, res.Status, res.Body)
			}
			got, err := fileOf(res)
			if err != nil {
				t.Fatal(err)
			}
			want := sha("base")
			if i%2 == 0 {
				want = sha("writer-" + strconv.Itoa(i))
				if _, taken := named[got.Version]; taken {
					t.Fatalf("two writes answered version %d", got.Version)
				}
			}
			if got.SHA256 != want || (named[got.Version] != "" && named[got.Version] != want) {
				t.Fatalf("request %d answered version %d with %s", i, got.Version, got.SHA256)
			}
			named[got.Version] = want
		}
		l := versionList(t, c, f.ID, "")
		final := l.Data[0].Version
		for i, v := range l.Data {
			if v.Version != final-int64(i) {
				t.Fatalf("versions have a gap: %v", versionNumbers(l))
			}
			if want, ok := named[v.Version]; ok && v.SHA256 != want {
				t.Fatalf("version %d holds %s, its answer said %s", v.Version, v.SHA256, want)
			}
			if _, ok := named[v.Version]; !ok && v.Version > 2 {
				t.Fatalf("version %d was answered to nobody", v.Version)
			}
		}
		if final < 2+n/2 || final > 2+n {
			t.Fatalf("%d versions after %d replaces and %d reverts", final, n/2, n/2)
		}
		evs := eventList(t, b, c, "file_id="+f.ID).Data
		if int64(len(evs)) != final {
			t.Fatalf("%d events for %d versions: %v", len(evs), final, eventTypes(evs))
		}
		// Each version has its one event. (The feed lists events in the
		// order their transactions began, which under contention is not
		// always the order of the versions they made.)
		once := map[int64]bool{}
		for _, e := range evs {
			if e.Version == nil || once[*e.Version] || *e.Version < 1 || *e.Version > final {
				t.Fatalf("events name versions %v", evs)
			}
			once[*e.Version] = true
		}
	})

	t.Run("ConcurrentMovesOntoOnePathHaveOneWinner", func(t *testing.T) {
		c, _ := setup(t)
		const n = 6
		files := make([]apitest.File, n)
		for i := range files {
			files[i] = upload(t, c, "src/"+strconv.Itoa(i), strconv.Itoa(i)).Expect(t, 201).File(t)
		}
		results := make([]*apitest.Response, n)
		parallel(n, func(i int) { results[i] = move(c, files[i].ID, "dest.txt", "") })
		winner := -1
		for i, res := range results {
			if res.Status == http.StatusOK {
				if winner >= 0 {
					t.Fatalf("two moves won: %d and %d", winner, i)
				}
				winner = i
			}
		}
		if winner < 0 {
			t.Fatal("no move won")
		}
		for i, res := range results {
			if i == winner {
				continue
			}
			if p := res.ExpectProblem(t, http.StatusConflict, "PATH_EXISTS"); p.ExistingFileID != files[winner].ID {
				t.Fatalf("loser %d names %s, winner is %s", i, p.ExistingFileID, files[winner].ID)
			}
			if got := c.Do("GET", "/v1/files/"+files[i].ID, nil).Expect(t, 200).File(t); got.Path != "src/"+strconv.Itoa(i) {
				t.Fatalf("a losing move moved: %+v", got)
			}
		}
		if l := list(t, c, "path=dest.txt"); len(l.Data) != 1 || l.Data[0].ID != files[winner].ID {
			t.Fatalf("dest.txt: %v", l.Data)
		}
	})

	t.Run("ReplacingMovesOntoOnePathKeepOneLiveFile", func(t *testing.T) {
		c, _ := setup(t)
		const n = 5
		dest := upload(t, c, "dest.txt", "dest").Expect(t, 201).File(t)
		files := make([]apitest.File, n)
		for i := range files {
			files[i] = upload(t, c, "src/"+strconv.Itoa(i), strconv.Itoa(i)).Expect(t, 201).File(t)
		}
		results := make([]*apitest.Response, n)
		parallel(n, func(i int) { results[i] = move(c, files[i].ID, "dest.txt", "replace") })
		for i, res := range results {
			res.Expect(t, http.StatusOK)
			if got, _ := fileOf(res); got.Path != "dest.txt" || got.ID != files[i].ID {
				t.Fatalf("move %d: %s", i, res.Body)
			}
		}
		if l := list(t, c, "path=dest.txt"); len(l.Data) != 1 {
			t.Fatalf("%d live files at dest.txt", len(l.Data))
		}
		if l := list(t, c, "path=dest.txt&include_deleted=true"); len(l.Data) != n+1 {
			t.Fatalf("%d files ever at dest.txt, want %d", len(l.Data), n+1)
		}
		if got := c.Do("GET", "/v1/files/"+dest.ID, nil).Expect(t, 200).File(t); got.DeletedAt == nil {
			t.Fatal("the first destination is still live")
		}
	})

	t.Run("AMoveRacingADelete", func(t *testing.T) {
		c, b := setup(t)
		for round := 0; round < 4; round++ {
			f := upload(t, c, fmt.Sprintf("r%d/a.txt", round), "a").Expect(t, 201).File(t)
			var moved, deleted *apitest.Response
			parallel(2, func(i int) {
				if i == 0 {
					moved = move(c, f.ID, fmt.Sprintf("r%d/b.txt", round), "")
				} else {
					deleted = c.Do("DELETE", "/v1/files/"+f.ID, nil)
				}
			})
			deleted.Expect(t, http.StatusOK)
			got := c.Do("GET", "/v1/files/"+f.ID, nil).Expect(t, 200).File(t)
			types := fmt.Sprint(eventTypes(eventList(t, b, c, "file_id="+f.ID).Data))
			switch moved.Status {
			case http.StatusOK:
				if got.DeletedAt == nil || got.Path != fmt.Sprintf("r%d/b.txt", round) || types != "[file.created file.moved file.deleted]" {
					t.Fatalf("moved then deleted: %+v, %s", got, types)
				}
			case http.StatusNotFound:
				if got.DeletedAt == nil || got.Path != fmt.Sprintf("r%d/a.txt", round) || types != "[file.created file.deleted]" {
					t.Fatalf("deleted, then the move found nothing: %+v, %s", got, types)
				}
			default:
				t.Fatalf("move: %d %s", moved.Status, moved.Body)
			}
		}
	})

	t.Run("ReadingVersionsWhileTheSweeperDropsThem", func(t *testing.T) {
		c, b := setup(t)
		const versions = 8
		content := func(n int) []byte { return bytes.Repeat([]byte{byte('a' + n)}, 256<<10) }
		f := c.Do("POST", "/v1/files?path=swept.bin", content(1)).Expect(t, 201).File(t)
		for n := 2; n <= versions; n++ {
			c.Do("POST", "/v1/files?path=swept.bin&if_exists=replace", content(n)).Expect(t, 200)
		}
		reading := make(chan struct{})
		var once sync.Once
		stop := readUntilStopped(2, func(i int) bool {
			n := 1 + i%versions
			res := c.Do("GET", versionContent(f.ID, n), nil)
			once.Do(func() { close(reading) })
			switch {
			case res.Status == http.StatusOK && bytes.Equal(res.Body, content(n)):
			case res.Status == http.StatusNotFound && n < versions:
			default:
				t.Errorf("version %d: %d, %d bytes", n, res.Status, len(res.Body))
				return false
			}
			return true
		})
		<-reading // the sweeps run while versions are being read
		ctx := context.Background()
		var swept int64
		for swept < versions-1 {
			n, err := b.srv.Store.SweepVersions(ctx, 0, 1)
			if err != nil {
				t.Fatal(err)
			}
			swept += n
			if _, err := b.srv.Store.SweepBlobs(ctx, time.Hour); err != nil {
				t.Fatal(err)
			}
		}
		stop()
		for n := 1; n < versions; n++ {
			c.Do("GET", versionContent(f.ID, n), nil).ExpectProblem(t, http.StatusNotFound, "NOT_FOUND")
		}
		if got := c.Do("GET", versionContent(f.ID, versions), nil).Expect(t, 200); !bytes.Equal(got.Body, content(versions)) {
			t.Fatal("the current version changed")
		}
		var l api.VersionList
		c.Do("GET", "/v1/files/"+f.ID+"/versions", nil).Expect(t, 200).JSON(t, &l)
		if len(l.Data) != 1 || !l.Data[0].Current {
			t.Fatalf("versions after the sweep: %+v", l.Data)
		}
	})
}
