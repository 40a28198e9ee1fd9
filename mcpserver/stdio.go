package mcpserver

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// StdioTransport is the stdio door's transport (`agentfs mcp`): the SDK's
// newline-delimited JSON-RPC over In and Out, except that the end of In
// does not drop the calls still running. The SDK, when its input ends,
// cancels every call in flight and refuses to write their answers, and a
// call still queued (an initialize written together with its initialized
// notification by a client that then closes its input) is skipped while the
// notification after it runs ("initialized before initialize"). So the
// SDK is told of the end only once every call read has been answered: a
// call still running after Drain is cancelled (notifications/cancelled, as
// a client would), answers as a cancelled call does, and then the end is
// told.
type StdioTransport struct {
	In  io.Reader
	Out io.Writer
	// Drain is how long the calls in flight when In ends may run on
	// before they are cancelled (AGENTFS_MCP_DRAIN_TIMEOUT); 0 is 10s.
	Drain time.Duration
	// MaxLine bounds one inbound message (the SDK's frame limit); 0 is
	// MaxBodyBytes of the default write limit, so every write the limit
	// allows fits, as through the /mcp door.
	MaxLine int
}

// DefaultDrain is how long calls in flight run on after stdin closed.
const DefaultDrain = 10 * time.Second

// cancelGrace is how long calls cancelled after the drain have to answer
// before the end of input is told anyway.
const cancelGrace = 5 * time.Second

// Connect implements mcp.Transport.
func (t *StdioTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	drain, maxLine := t.Drain, t.MaxLine
	if drain <= 0 {
		drain = DefaultDrain
	}
	if maxLine <= 0 {
		maxLine = int(MaxBodyBytes(DefaultMaxWriteBytes))
	}
	calls := &inFlight{ids: map[string]json.RawMessage{}, changed: make(chan struct{})}
	in := &drainingReader{src: bufio.NewReaderSize(t.In, 64<<10), calls: calls, drain: drain, maxLine: maxLine}
	out := &answerWriter{w: t.Out, calls: calls}
	return (&mcp.IOTransport{Reader: in, Writer: out, MaxLineLength: maxLine}).Connect(ctx)
}

// inFlight are the calls read and not answered yet, by id.
type inFlight struct {
	mu      sync.Mutex
	ids     map[string]json.RawMessage // key → the id as the client wrote it
	changed chan struct{}              // closed, and replaced, when a call is answered
}

func (f *inFlight) arrive(ids map[string]json.RawMessage) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for k, raw := range ids {
		f.ids[k] = raw
	}
}

func (f *inFlight) answered(ids map[string]json.RawMessage) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for k := range ids {
		delete(f.ids, k)
	}
	close(f.changed)
	f.changed = make(chan struct{})
}

// wait waits up to d for every call to be answered, and returns the ids
// of the calls still running.
func (f *inFlight) wait(d time.Duration) []json.RawMessage {
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	for {
		f.mu.Lock()
		var left []json.RawMessage
		for _, raw := range f.ids {
			left = append(left, raw)
		}
		changed := f.changed
		f.mu.Unlock()
		if len(left) == 0 {
			return nil
		}
		select {
		case <-changed:
		case <-deadline.C:
			return left
		}
	}
}

// messageIDs reads the ids of the calls, or of the answers, a line holds
// (one message or a batch), keyed so that an id and its answer's match
// however each spells the number.
func messageIDs(line []byte, answers bool) map[string]json.RawMessage {
	line = bytes.TrimSpace(line)
	ids := map[string]json.RawMessage{}
	add := func(m messageHead) {
		if len(m.ID) == 0 || bytes.Equal(m.ID, []byte("null")) || (m.Method == "") != answers {
			return
		}
		var v any
		if json.Unmarshal(m.ID, &v) == nil {
			ids[fmt.Sprintf("%T:%v", v, v)] = m.ID
		}
	}
	if len(line) == 0 {
		return ids
	}
	dec := json.NewDecoder(bytes.NewReader(line))
	if line[0] != '[' {
		var m messageHead
		if dec.Decode(&m) == nil {
			add(m)
		}
		return ids
	}
	if _, err := dec.Token(); err != nil {
		return ids
	}
	for dec.More() {
		var m messageHead
		if dec.Decode(&m) != nil {
			return ids
		}
		add(m)
	}
	return ids
}

// drainingReader is In as the SDK reads it: line by line, noting each
// call, and, once In ended, holding the end back until the calls are
// answered or cancelled.
type drainingReader struct {
	src     *bufio.Reader
	calls   *inFlight
	drain   time.Duration
	maxLine int

	buf     []byte // read and not yet handed on
	ended   error  // In's end (io.EOF) or failure
	phase   int    // after the end: 0 draining, 1 cancelled, 2 told
	through bool   // in a line longer than maxLine, handed on untracked
}

func (r *drainingReader) Read(p []byte) (int, error) {
	for len(r.buf) == 0 {
		if r.ended != nil {
			if r.buf = r.afterEnd(); len(r.buf) == 0 {
				return 0, r.ended
			}
			break
		}
		r.fill()
	}
	n := copy(p, r.buf)
	r.buf = r.buf[n:]
	return n, nil
}

// fill reads the next line (or, of a line too long to track, the next
// part) and notes the calls it holds.
func (r *drainingReader) fill() {
	var line []byte
	for {
		part, err := r.src.ReadSlice('\n')
		if r.through || len(line)+len(part) > r.maxLine {
			// Too long to be a message the SDK takes: it fails the
			// session on it; hand it on as it is.
			r.buf, r.through = append(line, part...), err == bufio.ErrBufferFull
			if err != nil && err != bufio.ErrBufferFull {
				r.ended = err
			}
			return
		}
		line = append(line, part...)
		if err == bufio.ErrBufferFull {
			continue
		}
		if err != nil {
			r.ended = err
		}
		break
	}
	r.calls.arrive(messageIDs(line, false))
	r.buf = line
}

// afterEnd is what the reader hands on once In ended: nothing while calls
// run (it waits for them, up to the drain), then a cancellation of each
// call still running, then, once they answered or the grace passed,
// nothing again: the end.
func (r *drainingReader) afterEnd() []byte {
	switch r.phase {
	case 0:
		r.phase = 1
		left := r.calls.wait(r.drain)
		var out []byte
		for _, id := range left {
			n, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": "notifications/cancelled",
				"params": map[string]any{"requestId": id, "reason": "the client closed stdin"}})
			out = append(append(out, n...), '\n')
		}
		if len(out) > 0 {
			return out
		}
	case 1:
		r.calls.wait(cancelGrace)
	}
	r.phase = 2
	return nil
}

// Close closes In when it can be closed.
func (r *drainingReader) Close() error { return nil }

// answerWriter is Out as the SDK writes it: one message (or batch of
// answers) per write, each answer noted.
type answerWriter struct {
	w     io.Writer
	calls *inFlight
}

func (w *answerWriter) Write(p []byte) (int, error) {
	n, err := w.w.Write(p)
	if err == nil {
		w.calls.answered(messageIDs(p, true))
	}
	return n, err
}

// Close does not close Out, which the process owns.
func (w *answerWriter) Close() error { return nil }
