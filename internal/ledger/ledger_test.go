package ledger_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/fintech-bff/bff/internal/ledger"
	"github.com/fintech-bff/bff/internal/pgtest"
)

// store is the protocol both ledgers implement.
type store interface {
	Claim(ctx context.Context, req ledger.Request, bound time.Duration) (*ledger.Claim, *ledger.Record, error)
	Finish(ctx context.Context, c *ledger.Claim, o ledger.Outcome) (bool, error)
	Release(ctx context.Context, c *ledger.Claim, o ledger.Outcome) (bool, error)
	Unknown(ctx context.Context, c *ledger.Claim, o ledger.Outcome) (bool, error)
	Abandon(ctx context.Context, id int64) (bool, error)
	Settle(ctx context.Context, id int64, o ledger.Outcome) (bool, error)
	Neighbours(ctx context.Context, req ledger.Request, except int64, since time.Time) (ledger.Neighbours, error)
	Event(ctx context.Context, id int64, req ledger.Request, what string) error
	AbandonStale(ctx context.Context) (int64, error)
	Ping(ctx context.Context) error
}

var (
	_ store = (*ledger.Postgres)(nil)
	_ store = (*ledger.Memory)(nil)
)

func key32() []byte {
	k := make([]byte, 32)
	_, _ = rand.Read(k)
	return k
}

// ticking is a clock that moves 1 ms each time it is read, so a 1 µs bound
// has passed by the next call, as it has on a database's clock.
func ticking() func() time.Time {
	var mu sync.Mutex
	t := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	return func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		t = t.Add(time.Millisecond)
		return t
	}
}

func openPostgres(t *testing.T, url string, key []byte, older ...[]byte) *ledger.Postgres {
	t.Helper()
	p, err := ledger.Open(context.Background(), ledger.Options{URL: url, EncryptionKey: key, DecryptionKeys: older})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// stores runs f against every ledger implementation.
func stores(t *testing.T, f func(t *testing.T, s store)) {
	t.Run("memory", func(t *testing.T) {
		m, err := ledger.NewMemory(ticking(), key32(), nil)
		if err != nil {
			t.Fatal(err)
		}
		f(t, m)
	})
	t.Run("postgres", func(t *testing.T) {
		f(t, openPostgres(t, pgtest.Database(t), key32()))
	})
}

var seq atomic.Int64

func request(body string) ledger.Request {
	fp := sha256.Sum256([]byte(body))
	return ledger.Request{
		UserID: "alice", Route: "/v2/payments", Key: fmt.Sprintf("key-%d", seq.Add(1)), Fingerprint: fp[:],
		SessionRef: "session-handle", ClientIP: "203.0.113.7", RequestID: "req-1",
	}
}

var created = &ledger.Response{Status: 201, Header: http.Header{"Content-Type": {"application/json"}},
	Body: []byte(`{"id":"01JPAYMENT","payUrl":"https://pay.example/secret-consent"}`)}

func TestProtocol(t *testing.T) {
	ctx := context.Background()
	stores(t, func(t *testing.T, s store) {
		t.Run("the first claim wins and a repeat sees it in flight", func(t *testing.T) {
			req := request("a")
			c, rec, err := s.Claim(ctx, req, time.Hour)
			if err != nil || c == nil || rec != nil {
				t.Fatalf("first claim: got %v, %v, %v; want a claim", c, rec, err)
			}
			c2, rec, err := s.Claim(ctx, req, time.Hour)
			if err != nil || c2 != nil || rec == nil {
				t.Fatalf("repeat: got %v, %v, %v; want the record", c2, rec, err)
			}
			if rec.State != ledger.StateInFlight || rec.Expired || !bytes.Equal(rec.Fingerprint, req.Fingerprint) {
				t.Fatalf("got state %s expired %v, want in_flight, not expired, same fingerprint", rec.State, rec.Expired)
			}
		})

		t.Run("finish stores the answer for replay", func(t *testing.T) {
			req := request("b")
			c, _, _ := s.Claim(ctx, req, time.Hour)
			if ok, err := s.Finish(ctx, c, ledger.Outcome{Ending: ledger.EndAnswered, UpstreamStatus: 201, PaymentID: "01JPAYMENT", Response: created}); !ok || err != nil {
				t.Fatalf("finish: got %v, %v", ok, err)
			}
			_, rec, err := s.Claim(ctx, req, time.Hour)
			if err != nil || rec == nil || rec.State != ledger.StateDone {
				t.Fatalf("repeat after finish: got %+v, %v; want done", rec, err)
			}
			if rec.Response == nil || rec.Response.Status != 201 || !bytes.Equal(rec.Response.Body, created.Body) ||
				rec.Response.Header.Get("Content-Type") != "application/json" {
				t.Fatalf("got response %+v, want the stored 201", rec.Response)
			}
			if rec.PaymentID != "01JPAYMENT" || rec.UpstreamStatus != 201 || rec.Ending != ledger.EndAnswered {
				t.Fatalf("got payment %q status %d ending %q", rec.PaymentID, rec.UpstreamStatus, rec.Ending)
			}
		})

		t.Run("a released key runs again, but only with the same request", func(t *testing.T) {
			req := request("c")
			c, _, _ := s.Claim(ctx, req, time.Hour)
			if ok, err := s.Release(ctx, c, ledger.Outcome{Ending: ledger.EndNotSent}); !ok || err != nil {
				t.Fatalf("release: got %v, %v", ok, err)
			}
			other := req
			other.Fingerprint = bytes.Repeat([]byte{1}, 32)
			if c2, rec, err := s.Claim(ctx, other, time.Hour); c2 != nil || err != nil || rec.State != ledger.StateReleased {
				t.Fatalf("another body on a released key: got %v, %+v, %v; want the released record", c2, rec, err)
			}
			c3, _, err := s.Claim(ctx, req, time.Hour)
			if c3 == nil || err != nil || c3.ID != c.ID || c3.Owner == c.Owner {
				t.Fatalf("same body on a released key: got %+v, %v; want a new claim on the same record", c3, err)
			}
			if ok, _ := s.Finish(ctx, c, ledger.Outcome{Ending: ledger.EndAnswered}); ok {
				t.Fatal("the first owner finished a record it no longer owns")
			}
		})

		t.Run("an unknown outcome is never claimable and can be settled", func(t *testing.T) {
			req := request("d")
			c, _, _ := s.Claim(ctx, req, time.Hour)
			if ok, err := s.Unknown(ctx, c, ledger.Outcome{Ending: ledger.EndAmbiguous}); !ok || err != nil {
				t.Fatalf("unknown: got %v, %v", ok, err)
			}
			if c2, rec, _ := s.Claim(ctx, req, time.Hour); c2 != nil || rec.State != ledger.StateUnknown {
				t.Fatalf("repeat: got claim %v, record %+v; want the unknown record", c2, rec)
			}
			if ok, _ := s.Release(ctx, c, ledger.Outcome{Ending: ledger.EndNotSent}); ok {
				t.Fatal("an unknown record was released: the key could run again")
			}
			if ok, err := s.Settle(ctx, c.ID, ledger.Outcome{UpstreamStatus: 201, PaymentID: "01JSETTLED", Response: created}); !ok || err != nil {
				t.Fatalf("settle: got %v, %v", ok, err)
			}
			_, rec, _ := s.Claim(ctx, req, time.Hour)
			if rec.State != ledger.StateDone || rec.Ending != ledger.EndSettled || rec.PaymentID != "01JSETTLED" || rec.Response == nil {
				t.Fatalf("after settle: got %+v, want done, settled, with the answer", rec)
			}
			if ok, _ := s.Settle(ctx, c.ID, ledger.Outcome{PaymentID: "01JOTHER"}); ok {
				t.Fatal("a settled record was settled again")
			}
			if ok, _ := s.Finish(ctx, c, ledger.Outcome{PaymentID: "01JOTHER"}); ok {
				t.Fatal("the owner overwrote a settled record")
			}
		})

		t.Run("a claim past its deadline is abandoned, never run again", func(t *testing.T) {
			req := request("e")
			fresh, _, _ := s.Claim(ctx, request("e2"), time.Hour)
			c, _, _ := s.Claim(ctx, req, time.Microsecond)
			_, rec, _ := s.Claim(ctx, req, time.Hour)
			if rec == nil || rec.State != ledger.StateInFlight || !rec.Expired {
				t.Fatalf("got %+v, want in flight and expired", rec)
			}
			if ok, err := s.Abandon(ctx, fresh.ID); ok || err != nil {
				t.Fatalf("abandoning a live claim: got %v, %v; want false", ok, err)
			}
			if ok, err := s.Abandon(ctx, c.ID); !ok || err != nil {
				t.Fatalf("abandon: got %v, %v", ok, err)
			}
			if c2, rec, _ := s.Claim(ctx, req, time.Hour); c2 != nil || rec.State != ledger.StateUnknown || rec.Ending != ledger.EndOwnerLost {
				t.Fatalf("after abandon: got claim %v, record %+v; want unknown, owner_lost", c2, rec)
			}
			// The owner was only slow: its late answer still lands.
			if ok, _ := s.Finish(ctx, c, ledger.Outcome{Ending: ledger.EndAnswered, UpstreamStatus: 201, PaymentID: "01JLATE", Response: created}); !ok {
				t.Fatal("the late owner could not store its answer")
			}
		})

		t.Run("the sweeper abandons stale claims only", func(t *testing.T) {
			live, _, _ := s.Claim(ctx, request("f1"), time.Hour)
			stale, _, _ := s.Claim(ctx, request("f2"), time.Microsecond)
			n, err := s.AbandonStale(ctx)
			if err != nil || n < 1 {
				t.Fatalf("got %d, %v; want at least the stale claim", n, err)
			}
			if ok, _ := s.Unknown(ctx, stale, ledger.Outcome{}); ok {
				t.Fatal("the stale claim was still in flight")
			}
			if ok, _ := s.Unknown(ctx, live, ledger.Outcome{Ending: ledger.EndAmbiguous}); !ok {
				t.Fatal("the sweeper took a live claim")
			}
		})

		t.Run("neighbours name other records' payments and open requests", func(t *testing.T) {
			since := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
			base := request("g")
			base.UserID = fmt.Sprintf("neighbour-%d", seq.Add(1))
			base.Match = []byte("content-1")
			a := base
			a.Key = "a"
			ca, _, _ := s.Claim(ctx, a, time.Hour)
			other := base
			other.Key, other.Match = "other-content", []byte("content-2")
			if _, _, err := s.Claim(ctx, other, time.Hour); err != nil {
				t.Fatal(err)
			}
			if n, err := s.Neighbours(ctx, a, ca.ID, since); err != nil || n.Open {
				t.Fatalf("an open request with other content: got %+v, %v; want not open", n, err)
			}
			b := base
			b.Key = "b"
			cb, _, _ := s.Claim(ctx, b, time.Hour)
			n, err := s.Neighbours(ctx, a, ca.ID, since)
			if err != nil || !n.Open || len(n.Taken) != 0 {
				t.Fatalf("an open request with the same content: got %+v, %v; want open, nothing taken", n, err)
			}
			_, _ = s.Finish(ctx, cb, ledger.Outcome{Ending: ledger.EndAnswered, PaymentID: "01JB", Response: created})
			n, _ = s.Neighbours(ctx, a, ca.ID, since)
			if n.Open || !n.Taken["01JB"] {
				t.Fatalf("got %+v, want not open, 01JB taken", n)
			}
			stranger := base
			stranger.UserID = "someone-else"
			if n, _ := s.Neighbours(ctx, stranger, 0, since); n.Open || len(n.Taken) != 0 {
				t.Fatalf("another user's neighbours: got %+v, want none", n)
			}
		})

		t.Run("concurrent claims of one key: exactly one wins", func(t *testing.T) {
			req := request("h")
			var wg sync.WaitGroup
			var won, lost atomic.Int64
			for i := 0; i < 16; i++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					c, rec, err := s.Claim(ctx, req, time.Hour)
					switch {
					case err != nil:
						t.Error(err)
					case c != nil:
						won.Add(1)
					case rec != nil:
						lost.Add(1)
					}
				}()
			}
			wg.Wait()
			if won.Load() != 1 || lost.Load() != 15 {
				t.Fatalf("got %d winners and %d losers, want 1 and 15", won.Load(), lost.Load())
			}
		})
	})
}

func TestPostgresDurability(t *testing.T) {
	ctx := context.Background()
	url := pgtest.Database(t)
	key, next := key32(), key32()

	t.Run("instances starting together migrate once", func(t *testing.T) {
		var wg sync.WaitGroup
		for i := 0; i < 4; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				p, err := ledger.Open(ctx, ledger.Options{URL: url, EncryptionKey: key})
				if err != nil {
					t.Error(err)
					return
				}
				p.Close()
			}()
		}
		wg.Wait()
	})

	first := openPostgres(t, url, key)
	req := request("durable")
	c, _, err := first.Claim(ctx, req, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := first.Finish(ctx, c, ledger.Outcome{Ending: ledger.EndAnswered, UpstreamStatus: 201, PaymentID: "01JPAYMENT", Response: created}); err != nil {
		t.Fatal(err)
	}
	if err := first.Event(ctx, c.ID, req, ledger.EventReplayed); err != nil {
		t.Fatal(err)
	}

	t.Run("the answer is sealed at rest", func(t *testing.T) {
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		var resp []byte
		var pid string
		if err := conn.QueryRow(ctx, "SELECT response, payment_id FROM money_requests WHERE id = $1", c.ID).Scan(&resp, &pid); err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(resp, []byte("secret-consent")) || bytes.Contains(resp, []byte("payUrl")) {
			t.Fatal("the stored answer is readable in the database")
		}
		if pid != "01JPAYMENT" {
			t.Fatalf("got payment_id %q, want it in plain for the audit", pid)
		}
		var events int
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM money_request_events WHERE money_request = $1", c.ID).Scan(&events); err != nil {
			t.Fatal(err)
		}
		if events != 2 {
			t.Fatalf("got %d audit events, want 2 (claimed, replayed)", events)
		}
	})

	t.Run("a new process with a rotated key still replays", func(t *testing.T) {
		rotated := openPostgres(t, url, next, key)
		_, rec, err := rotated.Claim(ctx, req, time.Hour)
		if err != nil || rec.Response == nil || !bytes.Equal(rec.Response.Body, created.Body) {
			t.Fatalf("got %+v, %v; want the stored answer", rec, err)
		}
	})

	t.Run("without the old key the answer is unreadable, never rerun", func(t *testing.T) {
		forgot := openPostgres(t, url, next)
		c, _, err := forgot.Claim(ctx, req, time.Hour)
		if c != nil || !errors.Is(err, ledger.ErrUnreadable) {
			t.Fatalf("got claim %v, error %v; want ErrUnreadable", c, err)
		}
	})

	t.Run("a database that does not answer is ErrUnavailable", func(t *testing.T) {
		first.Close()
		_, _, err := first.Claim(ctx, request("down"), time.Hour)
		if !errors.Is(err, ledger.ErrUnavailable) {
			t.Fatalf("got %v, want ErrUnavailable", err)
		}
	})
}

func TestOpenNeverPrintsThePassword(t *testing.T) {
	_, err := ledger.Open(context.Background(), ledger.Options{URL: "postgres://u:hunter2-secret@127.0.0.1:1/x?connect_timeout=1", EncryptionKey: key32()})
	if err == nil {
		t.Fatal("got no error for a closed port")
	}
	if bytes.Contains([]byte(err.Error()), []byte("hunter2")) {
		t.Fatalf("the error shows the password: %v", err)
	}
	_, err = ledger.Open(context.Background(), ledger.Options{URL: "postgres://u:hunter2-secret@[::1/x", EncryptionKey: key32()})
	if err == nil || bytes.Contains([]byte(err.Error()), []byte("hunter2")) {
		t.Fatalf("got %v, want an error without the password", err)
	}
}
