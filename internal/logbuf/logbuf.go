// Package logbuf batches log writes: one write(2) per interval instead of
// one per access line, which on a busy instance is a system call per
// request saved. Lines are never split or reordered; at most one interval
// of lines is lost if the process is killed without Close. A Write never
// waits for the write(2): the flusher swaps buffers and writes outside the
// lock, so a slow log sink does not stall requests.
package logbuf

import (
	"bytes"
	"io"
	"sync"
	"time"
)

// soonAt asks the flusher to write early once this much is waiting.
const soonAt = 64 << 10

// Writer is an io.Writer that batches writes to an underlying writer.
// Safe for concurrent use; each Write call's bytes stay together.
type Writer struct {
	dst     io.Writer
	flushMu sync.Mutex // one flush at a time: keeps the order
	mu      sync.Mutex // guards buf and spare
	buf     *bytes.Buffer
	spare   *bytes.Buffer
	soon    chan struct{}
	stop    chan struct{}
	done    chan struct{}
}

// New starts a Writer flushing to dst every interval.
func New(dst io.Writer, interval time.Duration) *Writer {
	w := &Writer{dst: dst, buf: new(bytes.Buffer), spare: new(bytes.Buffer),
		soon: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go w.loop(interval)
	return w
}

// Write buffers p whole; it never blocks on the underlying writer.
func (w *Writer) Write(p []byte) (int, error) {
	w.mu.Lock()
	n, err := w.buf.Write(p)
	full := w.buf.Len() >= soonAt
	w.mu.Unlock()
	if full {
		select {
		case w.soon <- struct{}{}:
		default:
		}
	}
	return n, err
}

// Flush writes out what is buffered, in order.
func (w *Writer) Flush() {
	w.flushMu.Lock()
	defer w.flushMu.Unlock()
	w.mu.Lock()
	out := w.buf
	w.buf, w.spare = w.spare, nil
	w.mu.Unlock()
	if out.Len() > 0 {
		_, _ = w.dst.Write(out.Bytes())
	}
	out.Reset()
	w.mu.Lock()
	w.spare = out
	w.mu.Unlock()
}

func (w *Writer) loop(interval time.Duration) {
	defer close(w.done)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-w.stop:
			w.Flush()
			return
		case <-t.C:
			w.Flush()
		case <-w.soon:
			w.Flush()
		}
	}
}

// Close stops the flusher after a last flush.
func (w *Writer) Close() error {
	close(w.stop)
	<-w.done
	return nil
}
