//go:build integration

package session_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/fintech-bff/bff/internal/kv"
	"github.com/fintech-bff/bff/internal/session"
	"github.com/fintech-bff/bff/internal/testing/redistest"
)

// A device-bound session keeps its key's thumbprint wherever it is read:
// from the store, from this instance's copy, from another instance, in
// the user's list, across a write-back; an unbound one has none. Both with
// the in-process store and with Redis, with and without local copies.
func TestBoundSessionKeepsItsKey(t *testing.T) {
	const jkt = "0ZcOCORZNYy-DWpqq30jZyJGHTN0d2HglBV3uiguA4I"
	c, prefix := redistest.Client(t)
	stores := map[string]func() session.Store{
		"memory": func() session.Store { return kv.NewMemory(nil) },
		"redis":  func() session.Store { return kv.NewRedis(c, prefix) },
	}
	for name, newStore := range stores {
		for _, local := range []int64{0, 1 << 20} {
			t.Run(fmt.Sprintf("%s local %d", name, local), func(t *testing.T) {
				ctx := context.Background()
				st := newStore()
				user := "dana-" + t.Name() // the Redis subtests share a prefix
				opts := session.Options{IdleTimeout: time.Hour, AbsoluteTimeout: 2 * time.Hour, LocalBytes: local}
				a, b := session.NewManager(st, opts), session.NewManager(st, opts)
				if local > 0 {
					startRun(t, a)
					startRun(t, b)
				}
				id, rec, err := a.Create(ctx, session.New{UserID: user, Method: session.MethodMobile, JKT: jkt})
				if err != nil || rec.JKT != jkt {
					t.Fatalf("create: got %+v, %v; want the key's thumbprint", rec, err)
				}
				plain, _, err := a.Create(ctx, session.New{UserID: user, Method: session.MethodMobile})
				if err != nil {
					t.Fatal(err)
				}
				for i, m := range []*session.Manager{a, a, b, b} { // the store, then the copy, on each
					got, err := m.Lookup(ctx, id)
					if err != nil || got.JKT != jkt || got.UserID != user {
						t.Fatalf("lookup %d: got %+v, %v; want dana's bound session", i, got, err)
					}
					if got, err := m.Lookup(ctx, plain); err != nil || got.JKT != "" {
						t.Fatalf("lookup %d of the unbound one: got %+v, %v; want no key", i, got, err)
					}
				}
				list, err := a.List(ctx, user)
				if err != nil || len(list) != 2 {
					t.Fatalf("list: got %v, %v", list, err)
				}
				for _, in := range list {
					if want := map[bool]string{true: jkt, false: ""}[in.Handle == session.Handle(id)]; in.JKT != want {
						t.Fatalf("list: %s has jkt %q, want %q", in.Handle, in.JKT, want)
					}
				}
			})
		}
	}
}

// A record written before the binding existed (no "k") reads as an
// unbound session, every other field as it was.
func TestRecordWithoutKeyReadsAsUnbound(t *testing.T) {
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Second)
	st := kv.NewMemory(nil)
	old, _ := json.Marshal(map[string]any{"u": "erin", "c": now, "l": now, "a": now, "m": "mobile", "s": "sub-1", "i": "sid-1"})
	id := session.NewID()
	if err := st.Set(ctx, sessionKey(id), old, time.Hour); err != nil {
		t.Fatal(err)
	}
	m := session.NewManager(st, session.Options{IdleTimeout: time.Hour, AbsoluteTimeout: 2 * time.Hour})
	got, err := m.Lookup(ctx, id)
	if err != nil || got.JKT != "" || got.UserID != "erin" || got.Method != session.MethodMobile || got.Sub != "sub-1" || got.SID != "sid-1" || !got.CreatedAt.Equal(now) {
		t.Fatalf("got %+v, %v; want erin's unbound mobile session as written", got, err)
	}
}
