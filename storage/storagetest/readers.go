package storagetest

import (
	"io"
	"sync"
)

// OnFirstRead is r that runs fn once, when the body is first read: after
// the write was admitted and decided against the stored state, before it
// commits. A race test does the other side's write in fn.
func OnFirstRead(r io.Reader, fn func()) io.Reader {
	return &onFirstRead{Reader: r, fn: fn}
}

type onFirstRead struct {
	io.Reader
	once sync.Once
	fn   func()
}

func (r *onFirstRead) Read(p []byte) (int, error) {
	r.once.Do(r.fn)
	return r.Reader.Read(p)
}
