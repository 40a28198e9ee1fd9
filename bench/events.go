package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentfs/agentfs"
)

// eventPage is the part of GET /v1/events's answer the measurements read.
type eventPage struct {
	Data []struct {
		ID     string `json:"id"`
		FileID string `json:"file_id"`
		Path   string `json:"path"`
	} `json:"data"`
	NextCursor string `json:"next_cursor"`
	HasMore    bool   `json:"has_more"`
}

// events is GET /v1/events?query.
func (a *api) events(ctx context.Context, query string) (*eventPage, error) {
	var p eventPage
	if _, err := a.call(ctx, http.MethodGet, "/v1/events?"+query, nil, 0, nil, &p, http.StatusOK); err != nil {
		return nil, err
	}
	if p.NextCursor == "" {
		return nil, errors.New("GET /v1/events: answer without next_cursor")
	}
	return &p, nil
}

// deliveryBudget is the bound on the p50 from an event's commit to
// the answer of a follower waiting for it.
const deliveryBudget = 50 * time.Millisecond

// delivery: a follower waits on GET /v1/events?wait=30&after=CURSOR while a
// writer uploads a 4 KiB file; the time from the upload's commit to the
// follower's answer, over -events uploads one after another.
//
// The commit instant is Postgres's own commit timestamp of the event's
// transaction (scripts/bench.sh turns on track_commit_timestamp), on the
// same clock as this program's. Without it the bench can only bracket the
// commit between sending the upload and receiving its answer, and reports
// from the writer's answer instead (a lower bound).
func (b *bench) delivery(ctx context.Context) ([]row, error) {
	c := b.cfg
	name := fmt.Sprintf("event delivery, commit → waiting GET /v1/events answers, %d events", c.events)

	// Start at the end of the feed and take everything already there, so
	// that every timed wait is for the writer's event alone.
	page, err := b.api.events(ctx, "after=now&limit=1000")
	var se *statusError
	if errors.As(err, &se) && se.status == http.StatusNotFound {
		return []row{{name: name, agentfs: "not served yet (GET /v1/events: 404)", budget: "p50 ≤ 50 ms"}}, nil
	}
	if err != nil {
		return nil, err
	}
	cursor := page.NextCursor
	for len(page.Data) > 0 || page.HasMore {
		if page, err = b.api.events(ctx, "after="+url.QueryEscape(cursor)+"&limit=1000"); err != nil {
			return nil, err
		}
		cursor = page.NextCursor
	}

	type sample struct {
		eventID              string
		sent, answered, seen time.Time // upload sent, upload answered, follower answered
	}
	type answer struct {
		page *eventPage
		at   time.Time
		err  error
	}
	data := b.data.bytes(0, 4096)
	var samples []sample
	foreign := 0
	for i := 0; len(samples) < c.events; i++ {
		if i > 2*c.events+10 {
			return nil, fmt.Errorf("event delivery: only %d of %d answers held the writer's event alone (%d held others)", len(samples), c.events, foreign)
		}
		ch := make(chan answer, 1)
		go func(cursor string) {
			p, err := b.api.events(ctx, "wait=30&limit=100&after="+url.QueryEscape(cursor))
			ch <- answer{p, time.Now(), err}
		}(cursor)
		// Give the follower's request time to reach the server and start
		// waiting; the jitter keeps the uploads from falling into step
		// with the server's one-second recheck.
		select {
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		case <-time.After(40*time.Millisecond + rand.N(20*time.Millisecond)):
		}
		sent := time.Now()
		f, _, err := b.api.putFile(ctx, b.path(fmt.Sprintf("delivery/%d", i)), bytesReader(data), int64(len(data)), nil)
		if err != nil {
			return nil, err
		}
		answered := time.Now()
		var a answer
		select {
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		case a = <-ch:
		}
		if a.err != nil {
			return nil, fmt.Errorf("follower: %w", a.err)
		}
		cursor = a.page.NextCursor
		// The follower must have been woken by this upload's event, with
		// nothing else in the answer; anything else (an event of another
		// writer, an empty answer) is not a sample, and the follower
		// catches up before the next one.
		if len(a.page.Data) != 1 || a.page.Data[0].FileID != f.ID {
			foreign++
			for a.page.HasMore || !containsFile(a.page, f.ID) {
				if a.page, err = b.api.events(ctx, "wait=30&limit=100&after="+url.QueryEscape(cursor)); err != nil {
					return nil, err
				}
				cursor = a.page.NextCursor
				if !a.page.HasMore && len(a.page.Data) == 0 {
					return nil, fmt.Errorf("event delivery: the event of file %s never came", f.ID)
				}
			}
			continue
		}
		samples = append(samples, sample{eventID: a.page.Data[0].ID, sent: sent, answered: answered, seen: a.at})
	}

	// Commit instants, from Postgres.
	ids := make([]string, len(samples))
	for i, s := range samples {
		ids[i] = s.eventID
	}
	commits, source, err := b.commitTimes(ctx, ids)
	if err != nil {
		return nil, err
	}

	var fromCommit, fromAnswer, commitToAnswer []time.Duration
	for _, s := range samples {
		fromAnswer = append(fromAnswer, max(0, s.seen.Sub(s.answered)))
		if at, ok := commits[s.eventID]; ok && len(commits) == len(samples) {
			fromCommit = append(fromCommit, s.seen.Sub(at))
			commitToAnswer = append(commitToAnswer, s.answered.Sub(at))
		}
	}
	lat, what := fromCommit, "commit → follower's answer"
	if len(fromCommit) == 0 {
		lat, what = fromAnswer, "writer's answer → follower's answer (a lower bound: "+source+")"
	}
	p50, p90 := percentile(lat, 50), percentile(lat, 90)
	logf("  %d events (%d answers with other events skipped): %s p50 %s, p90 %s", len(samples), foreign, what, fmtMS(p50), fmtMS(p90))
	note := fmt.Sprintf("event delivery: %s over %d uploads of 4 KiB, one at a time, each about 50 ms after the follower's request was sent; p50 %s, p90 %s, max %s",
		what, len(samples), fmtMS(p50), fmtMS(p90), fmtMS(percentile(lat, 100)))
	if len(commitToAnswer) > 0 {
		note += fmt.Sprintf("; for scale, commit → the writer's own answer p50 %s, and writer's answer → follower's answer p50 %s",
			fmtMS(percentile(commitToAnswer, 50)), fmtMS(percentile(fromAnswer, 50)))
	}
	var slow []string
	for i, d := range lat {
		if d > 100*time.Millisecond {
			slow = append(slow, fmt.Sprintf("#%d (%s)", i+1, fmtMS(d)))
		}
	}
	if len(slow) > 0 {
		note += "; answered after more than 100 ms: " + strings.Join(slow, ", ")
	}
	b.notes = append(b.notes, note+".")
	verdict := "meets"
	if p50 > deliveryBudget {
		verdict = "misses"
	}
	if len(fromCommit) == 0 {
		verdict += " (lower bound)"
	}
	return []row{{
		name:    name,
		agentfs: fmt.Sprintf("p50 %s, p90 %s", fmtMS(p50), fmtMS(p90)),
		budget:  "p50 ≤ 50 ms",
		verdict: verdict,
	}}, nil
}

// commitTimes are the commit instants of the transactions that wrote the
// events ids (Postgres's track_commit_timestamp, which scripts/bench.sh
// turns on), on the same clock as this program's; none, with source saying
// why, without -database-url or the setting.
func (b *bench) commitTimes(ctx context.Context, ids []string) (map[string]time.Time, string, error) {
	commits := map[string]time.Time{}
	if b.cfg.databaseURL == "" {
		return commits, "no -database-url", nil
	}
	conn, err := pgx.Connect(ctx, b.cfg.databaseURL)
	if err != nil {
		return nil, "", fmt.Errorf("connect to Postgres: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	rows, err := conn.Query(ctx, `SELECT id, pg_xact_commit_timestamp(xmin) FROM events WHERE id = ANY($1)`, ids)
	if err == nil {
		for rows.Next() {
			var id string
			var at *time.Time
			if err = rows.Scan(&id, &at); err != nil {
				break
			}
			if at != nil {
				commits[id] = *at
			}
		}
		rows.Close()
		if err == nil {
			err = rows.Err()
		}
	}
	if err != nil {
		return map[string]time.Time{}, "commit timestamps unavailable: " + oneLine(err.Error(), 80), nil
	}
	return commits, "", nil
}

func containsFile(p *eventPage, fileID string) bool {
	for _, e := range p.Data {
		if e.FileID == fileID {
			return true
		}
	}
	return false
}

// feed: one page of 100 events after a cursor halfway into the subject's
// feed, with and without run_id, once -feed-small and then -feed-large
// events of this subject are in the events table (seeded with SQL, like
// the files of the listing measurement). One event in ten belongs to the
// listed run.
func (b *bench) feed(ctx context.Context) ([]row, error) {
	c := b.cfg
	span := fmt.Sprintf("%s → %s events", count(c.feedSmall), count(c.feedLarge))
	plainName := "event feed p50, limit 100 after a cursor halfway, " + span
	runName := "event feed p50 with run_id, limit 100 after a cursor halfway, " + span
	if c.databaseURL == "" {
		return []row{
			{name: plainName, agentfs: "skipped: no -database-url", budget: "flat (≤ 1.5×)"},
			{name: runName, agentfs: "skipped: no -database-url", budget: "flat (≤ 1.5×)"},
		}, nil
	}
	conn, subject, replica, err := b.seedSession(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	base, err := eventCounter(ctx, conn, subject)
	if err != nil {
		return nil, err
	}
	seeded := 0
	seed := func(upto int) error {
		return seedTable(ctx, conn, "events", &seeded, upto, func(from, to int) error {
			_, err := conn.Exec(ctx, `
INSERT INTO events (id, subject, pos, type, file_id, path, version, size_bytes, sha256, agent_id, run_id, request_id)
SELECT 'evt_seed' || $1 || '_' || g, $2, CASE WHEN $6 THEN $5::bigint + g END, 'file.created', 'file_feed' || $1 || '_' || g,
       'bench-feed/' || $1 || '/' || g, 1, 0, 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855',
       'seed-agent', 'feed-' || $1 || '-' || (g % 10), 'req_seed' || g
FROM generate_series($3::bigint, $4::bigint) AS g`, b.tag, subject, from, to, base, replica)
			if err == nil && replica {
				_, err = conn.Exec(ctx, `INSERT INTO event_counters (subject, n) VALUES ($1, $2)
					ON CONFLICT (subject) DO UPDATE SET n = excluded.n`, subject, base+int64(to))
			}
			return err
		})
	}
	// cursorAt is the cursor this server hands out after the seeded event
	// number g (the feed's cursors are positions in the subject's feed).
	cursorAt := func(g int) (string, error) {
		var pos int64
		err := conn.QueryRow(ctx, `SELECT pos FROM events WHERE id = $1`, fmt.Sprintf("evt_seed%s_%d", b.tag, g)).Scan(&pos)
		if err != nil {
			return "", fmt.Errorf("find seeded event %d: %w", g, err)
		}
		return agentfs.EventCursor{Position: pos, At: time.Now().UTC(), Subject: subject}.String(), nil
	}
	run := "feed-" + b.tag + "-7"
	type point struct {
		plain50, plain90, run50, run90 time.Duration
		plainWork, runWork             string
		total                          int64
	}
	measure := func() (point, error) {
		var p point
		cur, err := cursorAt(seeded / 2)
		if err != nil {
			return p, err
		}
		page := func(query string) func() error {
			return func() error {
				pg, err := b.api.events(ctx, query)
				if err == nil && (len(pg.Data) != 100 || !pg.HasMore) {
					err = fmt.Errorf("GET /v1/events?%s: %d events, has_more %v; want 100 and more", query, len(pg.Data), pg.HasMore)
				}
				return err
			}
		}
		after := "after=" + url.QueryEscape(cur) + "&limit=100"
		if p.plain50, p.plain90, p.plainWork, err = b.timedCalls(ctx, conn, "events", page(after)); err != nil {
			return p, err
		}
		if p.run50, p.run90, p.runWork, err = b.timedCalls(ctx, conn, "events", page(after+"&run_id="+url.QueryEscape(run))); err != nil {
			return p, err
		}
		err = conn.QueryRow(ctx, `SELECT count(*) FROM events`).Scan(&p.total)
		logf("  %d seeded events (%d in the table): p50 %s (p90 %s), with run_id p50 %s (p90 %s)",
			seeded, p.total, fmtMS(p.plain50), fmtMS(p.plain90), fmtMS(p.run50), fmtMS(p.run90))
		return p, err
	}

	points, err := atPoints([]int{c.feedSmall, c.feedLarge}, "events", &seeded, seed, measure)
	if err != nil {
		return nil, err
	}
	s, l := points[0], points[1]
	b.notes = append(b.notes, fmt.Sprintf("event feed: the events table held %d, then %d rows; the cursor sat after seeded event %d, then %d; "+
		"the listed run holds 1 in 10 seeded events; p90 %s → %s, with run_id %s → %s.",
		s.total, l.total, c.feedSmall/2, c.feedLarge/2, fmtMS(s.plain90), fmtMS(l.plain90), fmtMS(s.run90), fmtMS(l.run90)))
	b.notes = append(b.notes, fmt.Sprintf("event feed, Postgres work per call on the events table: %s, then %s; with run_id %s, then %s.",
		s.plainWork, l.plainWork, s.runWork, l.runWork))
	return []row{flatRow(plainName, s.plain50, l.plain50), flatRow(runName, s.run50, l.run50)}, nil
}
