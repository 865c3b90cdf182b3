package logbuf

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
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

func (c *countingWriter) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.b.String()
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

// What the ticker flushes is written once its interval has passed, not
// before: the test's clock is synctest's, so the interval is an hour and
// no real time goes by.
func TestFlushesOnTick(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dst := &countingWriter{}
		w := New(dst, time.Hour)
		defer w.Close()
		_, _ = w.Write([]byte("tick\n"))
		time.Sleep(time.Hour - time.Nanosecond)
		synctest.Wait()
		if got := dst.String(); got != "" {
			t.Fatalf("got %q written before the interval passed, want nothing", got)
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait() // the flusher has written, or is blocked for the next tick
		if got := dst.String(); got != "tick\n" {
			t.Fatalf("got %q written once the interval passed, want the line", got)
		}
	})
}

// A full buffer is written at once, without waiting for the tick: no time
// passes in the bubble.
func TestFlushesEarlyWhenFull(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dst := &countingWriter{}
		w := New(dst, time.Hour)
		defer w.Close()
		_, _ = w.Write(bytes.Repeat([]byte("x"), soonAt-1))
		synctest.Wait()
		if n := len(dst.String()); n != 0 {
			t.Fatalf("got %d bytes written before the buffer was full, want none", n)
		}
		_, _ = w.Write([]byte("xx"))
		synctest.Wait()
		if n := len(dst.String()); n != soonAt+1 {
			t.Fatalf("got %d bytes written, want the full buffer (%d) flushed early", n, soonAt+1)
		}
	})
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
