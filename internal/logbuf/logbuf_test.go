package logbuf

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fintech-bff/bff/internal/testing/poll"
)

type countingWriter struct {
	mu     sync.Mutex
	b      bytes.Buffer
	writes int
}

func (c *countingWriter) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.writes++
	return c.b.Write(p)
}

func TestBatchesWholeLinesInOrder(t *testing.T) {
	dst := &countingWriter{}
	w := New(dst, time.Hour) // only Close flushes here
	for i := 0; i < 1000; i++ {
		fmt.Fprintf(w, "line %d\n", i)
	}
	_ = w.Close()
	lines := strings.Split(strings.TrimSuffix(dst.b.String(), "\n"), "\n")
	if len(lines) != 1000 || dst.writes != 1 {
		t.Fatalf("got %d lines in %d writes, want 1000 in 1", len(lines), dst.writes)
	}
	for i, l := range lines {
		if l != fmt.Sprintf("line %d", i) {
			t.Fatalf("line %d is %q", i, l)
		}
	}
}

func TestFlushesOnTickAndWhenFull(t *testing.T) {
	dst := &countingWriter{}
	w := New(dst, 10*time.Millisecond)
	defer w.Close()
	_, _ = w.Write([]byte("tick\n"))
	poll.Until(t, 2*time.Second, "flushed by the ticker", func() bool {
		dst.mu.Lock()
		defer dst.mu.Unlock()
		return dst.b.String() == "tick\n"
	})
}

func TestFlushesEarlyWhenFull(t *testing.T) {
	dst := &countingWriter{}
	w := New(dst, time.Hour)
	defer w.Close()
	_, _ = w.Write(bytes.Repeat([]byte("x"), soonAt+10))
	written := func() int {
		dst.mu.Lock()
		defer dst.mu.Unlock()
		return dst.b.Len()
	}
	if !poll.Within(2*time.Second, func() bool { return written() == soonAt+10 }) {
		t.Fatalf("got %d bytes written, want the full buffer flushed early", written())
	}
}

func TestConcurrentWritesStayWhole(t *testing.T) {
	dst := &countingWriter{}
	w := New(dst, time.Millisecond)
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 500; i++ {
				_, _ = w.Write([]byte(fmt.Sprintf("g%d-%04d\n", g, i)))
			}
		}()
	}
	wg.Wait()
	_ = w.Close()
	for _, l := range strings.Split(strings.TrimSuffix(dst.b.String(), "\n"), "\n") {
		if len(l) != 7 {
			t.Fatalf("a line was split or merged: %q", l)
		}
	}
}
