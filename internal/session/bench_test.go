//go:build integration

package session_test

import (
	"context"
	"testing"
	"time"

	"github.com/fintech-bff/bff/internal/kv"
	"github.com/fintech-bff/bff/internal/session"
	"github.com/fintech-bff/bff/internal/testing/poll"
	"github.com/fintech-bff/bff/internal/testing/redistest"
)

func BenchmarkCookieDecode(b *testing.B) {
	c := mustCookies(b, key(1), key(2))
	ck, _ := c.New(session.NewID())
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := c.ID(ck.Value); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCookieEncode(b *testing.B) {
	c := mustCookies(b, key(1))
	id := session.NewID()
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := c.New(id); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSessionLookupHit is the steady-state session check: a live
// session read on every request.
func BenchmarkSessionLookupHitRedis(b *testing.B) {
	rc, prefix := redistest.Client(b)
	benchLookup(b, newBenchManager(b, kv.NewRedis(rc, prefix)))
}

// BenchmarkSessionLookupHitLocal is the steady state with the in-process
// layer live (on a real Redis): no round trip.
func BenchmarkSessionLookupHitLocal(b *testing.B) {
	rc, prefix := redistest.Client(b)
	m := session.NewManager(kv.NewRedis(rc, prefix), session.Options{IdleTimeout: time.Hour, AbsoluteTimeout: 2 * time.Hour, LocalBytes: 64 << 20})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go m.Run(ctx)
	poll.Until(b, 5*time.Second, "the invalidation subscription up", m.Live)
	benchLookup(b, m)
}

func BenchmarkSessionLookupHitMemory(b *testing.B) {
	benchLookup(b, newBenchManager(b, kv.NewMemory(nil)))
}

func newBenchManager(b *testing.B, store session.Store) *session.Manager {
	b.Helper()
	return session.NewManager(store, session.Options{IdleTimeout: time.Hour, AbsoluteTimeout: 2 * time.Hour})
}

func benchLookup(b *testing.B, m *session.Manager) {
	ctx := context.Background()
	id, _, err := m.Create(ctx, session.New{UserID: "bench", Method: session.MethodDev})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := m.Lookup(ctx, id); err != nil {
			b.Fatal(err)
		}
	}
}
