// Package logtest collects what a test's server, runner or sweeper logs,
// so the test can read it while their goroutines keep logging, and shows
// the warnings and errors when the test fails.
package logtest

import (
	"bytes"
	"strings"
	"sync"
	"testing"
)

// Buffer is a log sink safe for concurrent writers: the code under test
// (and River's goroutines) may log while the test reads.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p under the lock.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String is everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Take returns the lines written so far and forgets them, so a test can
// check what one step logged.
func (b *Buffer) Take() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := strings.TrimSpace(b.buf.String())
	b.buf.Reset()
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// ShowOnFailure logs, when t has failed by its end, every WARN and ERROR
// line written to b, each after prefix: the cause of a failure is often
// only in the log.
func (b *Buffer) ShowOnFailure(t testing.TB, prefix string) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		for _, line := range strings.Split(b.String(), "\n") {
			if strings.Contains(line, "level=WARN") || strings.Contains(line, "level=ERROR") {
				t.Log(prefix + line)
			}
		}
	})
}
