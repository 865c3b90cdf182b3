package payments_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/fintech-bff/bff/internal/ledger"
	"github.com/fintech-bff/bff/internal/payments"
	"github.com/fintech-bff/bff/internal/problem"
	"github.com/fintech-bff/bff/internal/testing/testclock"
)

func recordsFixture(t *testing.T) *payments.Service {
	t.Helper()
	clock := testclock.New(time.Now())
	led, err := ledger.NewMemory(clock.Now, make([]byte, 32), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i, k := range []string{"k1", "k2", "k3", "k4", "k5"} {
		fp := sha256.Sum256([]byte(k))
		c, _, err := led.Claim(ctx, ledger.Request{UserID: "alice", Route: "/v2/payments", Key: k, Fingerprint: fp[:]}, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		switch i {
		case 0:
			_, err = led.Finish(ctx, c, ledger.Outcome{Ending: ledger.EndAnswered, UpstreamStatus: 201, PaymentID: "P1",
				Response: &ledger.Response{Status: 201, Body: []byte(`{"id":"P1"}`)}})
		case 1:
			_, err = led.Unknown(ctx, c, ledger.Outcome{Ending: ledger.EndAmbiguous})
		}
		if err != nil {
			t.Fatal(err)
		}
		clock.Advance(time.Millisecond) // distinct createdAt
	}
	return payments.New(payments.Options{Ledger: led})
}

func TestRecordsPaging(t *testing.T) {
	svc := recordsFixture(t)
	ctx := context.Background()
	var keys []string
	cursor := ""
	for pages := 0; ; pages++ {
		page, err := svc.Records(ctx, "alice", cursor, 2)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range page.Items {
			keys = append(keys, r.Key)
		}
		if page.NextCursor == "" {
			if pages != 2 {
				t.Fatalf("got %d pages, want 3", pages+1)
			}
			break
		}
		cursor = page.NextCursor
	}
	if got, want := len(keys), 5; got != want || keys[0] != "k5" || keys[4] != "k1" {
		t.Fatalf("got %v, want k5 to k1", keys)
	}
	page, err := svc.Records(ctx, "alice", "", 0)
	if err != nil || len(page.Items) != 5 || page.NextCursor != "" {
		t.Fatalf("default limit: got %d items, cursor %q, %v", len(page.Items), page.NextCursor, err)
	}
	if page, err := svc.Records(ctx, "bob", "", 0); err != nil || len(page.Items) != 0 || page.Items == nil {
		t.Fatalf("another user: got %#v, %v; want an empty list", page.Items, err)
	}
}

func TestRecordFields(t *testing.T) {
	svc := recordsFixture(t)
	ctx := context.Background()
	for _, tc := range []struct {
		key    string
		state  string
		status int
		pid    string
	}{
		{"k1", "done", 201, "P1"},
		{"k2", "unknown", http.StatusBadGateway, ""},
		{"k3", "in_flight", 0, ""},
	} {
		r, err := svc.Record(ctx, "alice", tc.key)
		if err != nil {
			t.Fatal(err)
		}
		if r.Key != tc.key || r.State != tc.state || r.Status != tc.status || r.PaymentID != tc.pid || r.Route != "/v2/payments" ||
			r.PaymentStatus != nil || r.CreatedAt.IsZero() || r.UpdatedAt.Before(r.CreatedAt) {
			t.Errorf("%s: got %+v, want state %s, status %d, payment %q", tc.key, r, tc.state, tc.status, tc.pid)
		}
	}
}

func TestRecordsRefuses(t *testing.T) {
	svc := recordsFixture(t)
	ctx := context.Background()
	otherKey := recordsFixture(t) // a random cursor key of its own
	for _, tc := range []struct {
		name   string
		cursor string
		limit  int
	}{
		{"limit over 100", "", 101},
		{"negative limit", "", -1},
		{"cursor not base64url", "!!", 5},
		{"cursor too short", "AAAA", 5},
		{"cursor with id 0", svc.SealCursor("alice", ledger.Cursor{CreatedAt: time.Now()}), 5},
		{"another user's cursor", svc.SealCursor("bob", ledger.Cursor{CreatedAt: time.Now(), ID: 3}), 5},
		{"a cursor sealed under another key", otherKey.SealCursor("alice", ledger.Cursor{CreatedAt: time.Now(), ID: 3}), 5},
		{"an unsealed position", base64.RawURLEncoding.EncodeToString(make([]byte, 16)), 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := svc.Records(ctx, "alice", tc.cursor, tc.limit)
			var p *problem.Problem
			if !errors.As(err, &p) || p.Code != problem.CodeValidationError {
				t.Fatalf("got %v, want VALIDATION_ERROR", err)
			}
		})
	}
	for _, who := range []struct{ user, key string }{{"bob", "k1"}, {"alice", "nope"}, {"alice", ""}} {
		_, err := svc.Record(ctx, who.user, who.key)
		var p *problem.Problem
		if !errors.As(err, &p) || p.Code != problem.CodeRouteNotFound {
			t.Errorf("%s's %q: got %v, want ROUTE_NOT_FOUND", who.user, who.key, err)
		}
	}
}

// A cursor opens to its position for its user, after a key rotation too,
// and never shows the position: two cursors for one position differ.
func TestCursorRoundTrip(t *testing.T) {
	old, key := make([]byte, 32), make([]byte, 32)
	key[0] = 1
	c := ledger.Cursor{CreatedAt: time.Date(2026, 11, 26, 2, 0, 0, 123456000, time.UTC), ID: 42}
	before := payments.New(payments.Options{Ledger: memoryLedger(t), EncryptionKey: old})
	after := payments.New(payments.Options{Ledger: memoryLedger(t), EncryptionKey: key, DecryptionKeys: [][]byte{old}})
	for _, cursor := range []string{after.SealCursor("alice", c), before.SealCursor("alice", c)} {
		got, ok := after.OpenCursor("alice", cursor)
		if !ok || !got.CreatedAt.Equal(c.CreatedAt) || got.ID != c.ID {
			t.Fatalf("got %+v %v, want %+v", got, ok, c)
		}
	}
	if a, b := after.SealCursor("alice", c), after.SealCursor("alice", c); a == b {
		t.Fatalf("two cursors for one position are equal: %s", a)
	}
}

// A cursor comes from the client: any string opens or is refused, without
// a panic, and what opens is a position a cursor was sealed for.
func FuzzOpenCursor(f *testing.F) {
	svc := payments.New(payments.Options{Ledger: memoryLedger(f), EncryptionKey: make([]byte, 32)})
	f.Add("")
	f.Add(svc.SealCursor("alice", ledger.Cursor{CreatedAt: time.UnixMicro(1), ID: 1}))
	f.Add("AAAAAAAAAAAAAAAAAAAAAA")
	f.Fuzz(func(t *testing.T, s string) {
		c, ok := svc.OpenCursor("alice", s)
		if ok && s != "" && (c.ID != 1 || !c.CreatedAt.Equal(time.UnixMicro(1))) {
			t.Fatalf("%q opens to %+v, a position no cursor was sealed for", s, c)
		}
	})
}

// memoryLedger is an empty ledger in memory.
func memoryLedger(t testing.TB) *ledger.Memory {
	t.Helper()
	led, err := ledger.NewMemory(time.Now, make([]byte, 32), nil)
	if err != nil {
		t.Fatal(err)
	}
	return led
}
