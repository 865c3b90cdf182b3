package tokens_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fintech-bff/bff/internal/kv"
	"github.com/fintech-bff/bff/internal/testing/syncbuf"
	"github.com/fintech-bff/bff/internal/testing/testclock"
	"github.com/fintech-bff/bff/internal/tokens"
)

// secretFile stands in for client_secret_file: what its load returns is
// set by the test, and its reads are counted.
type secretFile struct {
	mu    sync.Mutex
	v     string
	err   error
	reads int
}

func (f *secretFile) load() (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads++
	return f.v, f.err
}

func (f *secretFile) set(v string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.v, f.err = v, err
}

func (f *secretFile) readCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reads
}

func newSecret(t testing.TB, f *secretFile, log *slog.Logger) *tokens.Secret {
	t.Helper()
	s, err := tokens.NewSecret(f.load, log)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// fixedSecret is a secret that never changes.
func fixedSecret(t testing.TB, v string) *tokens.Secret {
	t.Helper()
	return newSecret(t, &secretFile{v: v}, nil)
}

func TestNewSecretFailsWhenTheFirstReadFails(t *testing.T) {
	want := errors.New("no such file")
	if _, err := tokens.NewSecret(func() (string, error) { return "", want }, nil); !errors.Is(err, want) {
		t.Fatalf("got %v, want %v", err, want)
	}
}

func TestSecretIsRedacted(t *testing.T) {
	s := fixedSecret(t, testSecret)
	logs := &syncbuf.Buffer{}
	slog.New(slog.NewJSONHandler(logs, nil)).Info("x", slog.Any("secret", s))
	for _, got := range []string{fmt.Sprint(s), fmt.Sprintf("%+v", s), fmt.Sprintf("%#v", s), logs.String()} {
		if strings.Contains(got, testSecret) || !strings.Contains(got, "REDACTED") {
			t.Fatalf("got %s, want REDACTED", got)
		}
	}
}

// instance is one BFF's secret and token cache, on a store shared with
// the others (an in-process store, whose pub/sub delivers before Publish
// returns, so an announcement has been handled when Rotate returns).
type instance struct {
	file   *secretFile
	secret *tokens.Secret
	cache  *tokens.Cache
	src    *fakeSource
}

func newInstances(t *testing.T, n int, log *slog.Logger) []instance {
	t.Helper()
	clk := testclock.New(time.Unix(1_700_000_000, 0))
	store := kv.NewMemory(clk.Now)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	var out []instance
	for range n {
		in := instance{file: &secretFile{v: testSecret}, src: &fakeSource{now: clk.Now, life: time.Hour}}
		in.secret = newSecret(t, in.file, log)
		c, err := tokens.NewCache(store, in.src, in.secret, tokens.CacheOptions{
			EncryptionKey: encKey, RefreshBefore: time.Minute, MaxTTL: time.Hour, LocalBytes: 1 << 20, Now: clk.Now, Logger: log,
		})
		if err != nil {
			t.Fatal(err)
		}
		go c.Run(ctx)
		in.cache = c
		out = append(out, in)
	}
	waitFor(t, func() bool {
		for _, in := range out {
			if !in.cache.Live() {
				return false
			}
		}
		return true
	})
	return out
}

func TestSecretReloadAndRotate(t *testing.T) {
	readErr := errors.New("open client_secret: permission denied")
	cases := []struct {
		name          string
		rotate        bool // Rotate, else Reload
		next          string
		err           error
		wantChanged   bool
		wantCurrent   string
		wantAnnounced bool
		wantLog       string
	}{
		{name: "reload unchanged", next: testSecret, wantCurrent: testSecret},
		{name: "reload changed", next: "new-secret", wantChanged: true, wantCurrent: "new-secret"},
		{name: "reload error keeps current", next: "new-secret", err: readErr, wantCurrent: testSecret,
			wantLog: "the client secret could not be re-read; keeping the current one"},
		{name: "rotate unchanged", rotate: true, next: testSecret, wantCurrent: testSecret},
		{name: "rotate changed", rotate: true, next: "new-secret", wantChanged: true, wantCurrent: "new-secret",
			wantAnnounced: true, wantLog: "client secret re-read after another instance announced a rotation"},
		{name: "rotate error keeps current", rotate: true, next: "new-secret", err: readErr, wantCurrent: testSecret,
			wantLog: "the client secret could not be re-read; keeping the current one"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			logs := &syncbuf.Buffer{}
			ins := newInstances(t, 2, slog.New(slog.NewJSONHandler(logs, nil)))
			a, b := ins[0], ins[1]
			before, err := a.cache.Token(ctx, "alice")
			if err != nil {
				t.Fatal(err)
			}
			a.file.set(tc.next, tc.err)
			b.file.set(tc.next, nil) // b's own file was updated too
			op := a.secret.Reload
			if tc.rotate {
				op = func() (bool, error) { return a.secret.Rotate(ctx) }
			}
			changed, err := op()
			if changed != tc.wantChanged || !errors.Is(err, tc.err) {
				t.Fatalf("got %v, %v, want %v, %v", changed, err, tc.wantChanged, tc.err)
			}
			if got := a.secret.Current(); got != tc.wantCurrent {
				t.Fatalf("got current %q, want %q", got, tc.wantCurrent)
			}
			// The cache was told: a changed secret is a new generation.
			after, err := a.cache.Token(ctx, "alice")
			if err != nil {
				t.Fatal(err)
			}
			if fresh := after.Value != before.Value; fresh != tc.wantChanged {
				t.Fatalf("got a fresh token %v, want %v", fresh, tc.wantChanged)
			}
			// The other instance re-read its own file only if announced to.
			if got, want := b.file.readCount() > 1, tc.wantAnnounced; got != want {
				t.Fatalf("got the other instance re-reading %v, want %v", got, want)
			}
			if tc.wantAnnounced {
				if got, _ := b.cache.Token(ctx, "alice"); got.Value != after.Value {
					t.Fatalf("got %q on the other instance, want the new generation's %q", got.Value, after.Value)
				}
			}
			out := logs.String()
			if tc.wantLog != "" && !strings.Contains(out, tc.wantLog) {
				t.Fatalf("got logs %s, want a line with %q", out, tc.wantLog)
			}
			if strings.Contains(out, testSecret) || strings.Contains(out, "new-secret") {
				t.Fatal("a client secret appears in the logs")
			}
		})
	}
}

// Concurrent Rotate calls, with lookups in flight, are safe (run with
// -race): each change is reported once, and every instance ends on it.
func TestConcurrentRotate(t *testing.T) {
	ctx := context.Background()
	ins := newInstances(t, 2, nil)
	a, b := ins[0], ins[1]
	for round := range 4 {
		next := fmt.Sprintf("secret-%d", round)
		a.file.set(next, nil)
		b.file.set(next, nil)
		var wg sync.WaitGroup
		var changes atomic.Int64
		for i := range 32 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if i%2 == 0 {
					if _, err := ins[i%4/2].cache.Token(ctx, "alice"); err != nil {
						t.Error(err)
					}
					return
				}
				changed, err := a.secret.Rotate(ctx)
				if err != nil {
					t.Error(err)
				}
				if changed {
					changes.Add(1)
				}
			}()
		}
		wg.Wait()
		if got := changes.Load(); got != 1 {
			t.Fatalf("round %d: %d Rotate calls reported a change, want 1", round, got)
		}
		if a.secret.Current() != next || b.secret.Current() != next {
			t.Fatalf("round %d: got %q and %q, want both %q", round, a.secret.Current(), b.secret.Current(), next)
		}
		ta, _ := a.cache.Token(ctx, "alice")
		tb, _ := b.cache.Token(ctx, "alice")
		if ta.Value != tb.Value {
			t.Fatalf("round %d: the instances serve %q and %q, want one token of the new generation", round, ta.Value, tb.Value)
		}
	}
}
