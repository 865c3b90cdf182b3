//go:build integration

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
	"github.com/fintech-bff/bff/internal/payments"
	"github.com/fintech-bff/bff/internal/testing/pgtest"
)

// store is the protocol both ledgers implement: what payments drives, what
// the metrics read, and a ping.
type store interface {
	payments.Ledger
	Unknowns(ctx context.Context) (int64, time.Time, error)
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
// The wait moves it on as time passing would.
func ticking() (now func() time.Time, wait func(time.Duration)) {
	var mu sync.Mutex
	t := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	return func() time.Time {
			mu.Lock()
			defer mu.Unlock()
			t = t.Add(time.Millisecond)
			return t
		}, func(d time.Duration) {
			mu.Lock()
			defer mu.Unlock()
			t = t.Add(d)
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

// stores runs f against every ledger implementation; wait lets d pass on
// the store's clock.
func stores(t *testing.T, f func(t *testing.T, s store, wait func(time.Duration))) {
	t.Run("memory", func(t *testing.T) {
		now, wait := ticking()
		m, err := ledger.NewMemory(now, key32(), nil)
		if err != nil {
			t.Fatal(err)
		}
		f(t, m, wait)
	})
	t.Run("postgres", func(t *testing.T) {
		// PostgreSQL's clock (now()) is the real one: wait lets real time pass.
		f(t, openPostgres(t, pgtest.Database(t), key32()), time.Sleep)
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
	stores(t, func(t *testing.T, s store, wait func(time.Duration)) {
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

		t.Run("a claim past its deadline after its send mark is abandoned as unknown, never run again", func(t *testing.T) {
			req := request("e")
			fresh, _, _ := s.Claim(ctx, request("e2"), time.Hour)
			c, _, _ := s.Claim(ctx, req, 50*time.Millisecond)
			if ok, err := s.Sending(ctx, c, ledger.Send{}); !ok || err != nil {
				t.Fatalf("mark: got %v, %v", ok, err)
			}
			wait(60 * time.Millisecond) // the store's clock passes the deadline
			_, rec, _ := s.Claim(ctx, req, time.Hour)
			if rec == nil || rec.State != ledger.StateInFlight || !rec.Expired || !rec.Sent {
				t.Fatalf("got %+v, want in flight, expired, sent", rec)
			}
			if st, err := s.Abandon(ctx, fresh.ID); st != "" || err != nil {
				t.Fatalf("abandoning a live claim: got %q, %v; want no change", st, err)
			}
			if ok, _ := s.Sending(ctx, c, ledger.Send{}); ok {
				t.Fatal("an owner past its deadline could still mark a send")
			}
			if st, err := s.Abandon(ctx, c.ID); st != ledger.StateUnknown || err != nil {
				t.Fatalf("abandon: got %q, %v; want unknown", st, err)
			}
			if c2, rec, _ := s.Claim(ctx, req, time.Hour); c2 != nil || rec.State != ledger.StateUnknown || rec.Ending != ledger.EndOwnerLost {
				t.Fatalf("after abandon: got claim %v, record %+v; want unknown, owner_lost", c2, rec)
			}
			// The owner was only slow: its late answer still lands.
			if ok, _ := s.Finish(ctx, c, ledger.Outcome{Ending: ledger.EndAnswered, UpstreamStatus: 201, PaymentID: "01JLATE", Response: created}); !ok {
				t.Fatal("the late owner could not store its answer")
			}
		})

		t.Run("a claim past its deadline without a send mark is given back", func(t *testing.T) {
			req := request("e3")
			c, _, _ := s.Claim(ctx, req, 50*time.Millisecond)
			wait(60 * time.Millisecond)
			if st, err := s.Abandon(ctx, c.ID); st != ledger.StateReleased || err != nil {
				t.Fatalf("abandon: got %q, %v; want released", st, err)
			}
			if ok, _ := s.Sending(ctx, c, ledger.Send{}); ok {
				t.Fatal("the dead owner could still mark a send after its claim was given back")
			}
			c2, rec, err := s.Claim(ctx, req, time.Hour)
			if c2 == nil || rec != nil || err != nil {
				t.Fatalf("the repeat: got claim %v, record %+v, %v; want a new claim", c2, rec, err)
			}
		})

		t.Run("the settler leases open records once until their lease runs out", func(t *testing.T) {
			stale, _, _ := s.Claim(ctx, request("f2"), 50*time.Millisecond)
			withContent := request("f3")
			withContent.Content = []byte(`{"paymentInformation":{"amount":1}}`)
			unknown, _, _ := s.Claim(ctx, withContent, time.Hour)
			_, _ = s.Sending(ctx, unknown, ledger.Send{Snapshot: true, SeenBefore: []string{"01JOLD"}})
			_, _ = s.Unknown(ctx, unknown, ledger.Outcome{Ending: ledger.EndAmbiguous})
			live, _, _ := s.Claim(ctx, request("f1"), time.Hour)
			wait(1100 * time.Millisecond) // past the stale deadline and the unknown's first wait
			due, err := s.Due(ctx, 100, time.Hour, time.Hour, time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			got := map[int64]*ledger.Record{}
			for _, r := range due {
				got[r.ID] = r
			}
			if got[stale.ID] == nil || got[unknown.ID] == nil || got[live.ID] != nil {
				t.Fatalf("got %d due records %v, want the stale and the unknown one, not the live one", len(due), got)
			}
			if r := got[unknown.ID]; string(r.Content) != `{"paymentInformation":{"amount":1}}` || !r.Send.Snapshot || len(r.Send.SeenBefore) != 1 || r.UserID != "alice" {
				t.Fatalf("got evidence %+v, want the recorded one", r.Send)
			}
			again, _ := s.Due(ctx, 100, time.Hour, time.Hour, time.Hour)
			for _, r := range again {
				if r.ID == stale.ID || r.ID == unknown.ID {
					t.Fatalf("record %d was leased twice", r.ID)
				}
			}
			if n, oldest, err := s.Unknowns(ctx); err != nil || n < 1 || oldest.IsZero() {
				t.Fatalf("unknowns: got %d, %v, %v; want at least one with its time", n, oldest, err)
			}
		})

		t.Run("others are the user's other records, on every route and in every state, that may have met the upstream after a time", func(t *testing.T) {
			since := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
			base := request("g")
			base.UserID = fmt.Sprintf("others-%d", seq.Add(1))
			a := base
			a.Key = "a"
			ca, _, _ := s.Claim(ctx, a, time.Hour)
			b := base
			b.Key, b.Route, b.Content = "b", "/v2/pay", []byte(`{"paymentInformation":{"amount":3}}`)
			cb, _, _ := s.Claim(ctx, b, time.Hour)
			if ok, err := s.Sending(ctx, cb, ledger.Send{Snapshot: true}); !ok || err != nil {
				t.Fatal(ok, err)
			}
			c := base
			c.Key = "c"
			cc, _, _ := s.Claim(ctx, c, time.Hour)
			_, _ = s.Release(ctx, cc, ledger.Outcome{Ending: ledger.EndNotSent})
			got, err := s.Others(ctx, a.UserID, ca.ID, since, nil)
			if err != nil || len(got) != 2 {
				t.Fatalf("got %+v, %v; want the two other records (one released)", got, err)
			}
			byKey := map[string]ledger.Other{}
			for _, o := range got {
				byKey[o.Key] = o
			}
			if o := byKey["b"]; o.Route != "/v2/pay" || !o.Sent || string(o.Content) != string(b.Content) || o.State != ledger.StateInFlight {
				t.Fatalf("got %+v, want b in flight, sent, with its content", o)
			}
			if o := byKey["c"]; o.Sent || o.State != ledger.StateReleased || o.Ending != ledger.EndNotSent || o.Content != nil {
				t.Fatalf("got %+v, want c released, never sent", o)
			}
			if got, _ := s.Others(ctx, a.UserID, ca.ID, time.Now().Add(2*time.Hour), nil); len(got) != 0 {
				t.Fatalf("records whose deadline is before the time asked about: got %+v, want none", got)
			}
			_, _ = s.Finish(ctx, cb, ledger.Outcome{Ending: ledger.EndAnswered, UpstreamStatus: 200, PaymentID: "01JB", Response: created})
			got, _ = s.Others(ctx, a.UserID, ca.ID, time.Now().Add(2*time.Hour), []string{"01JB", "01JC"})
			if len(got) != 1 || got[0].PaymentID != "01JB" || got[0].UpstreamStatus != 200 {
				t.Fatalf("got %+v, want the record that owns 01JB, whatever its deadline", got)
			}
			if got, _ := s.Others(ctx, "someone-else", 0, since, []string{"01JB"}); len(got) != 0 {
				t.Fatalf("another user's others: got %+v, want none", got)
			}
		})

		t.Run("an unknown record proved not made is given back, once", func(t *testing.T) {
			req := request("gb")
			c, _, _ := s.Claim(ctx, req, time.Hour)
			if ok, _ := s.GiveBack(ctx, c.ID); ok {
				t.Fatal("a record in flight was given back")
			}
			_, _ = s.Sending(ctx, c, ledger.Send{Snapshot: true})
			_, _ = s.Unknown(ctx, c, ledger.Outcome{Ending: ledger.EndAmbiguous})
			if ok, err := s.GiveBack(ctx, c.ID); !ok || err != nil {
				t.Fatalf("got %v, %v; want the unknown record given back", ok, err)
			}
			if ok, _ := s.GiveBack(ctx, c.ID); ok {
				t.Fatal("a record was given back twice")
			}
			again, rec, err := s.Claim(ctx, req, time.Hour)
			if err != nil || again == nil {
				t.Fatalf("got %+v, %v; want the given-back key claimed again", rec, err)
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

// During a rolling upgrade, instances of the version before the send mark
// still claim keys: such a claim never writes the mark, so past its
// deadline it is unknown (it may have been sent), never given back.
func TestClaimOfAnEarlierVersionIsNeverGivenBack(t *testing.T) {
	ctx := context.Background()
	url := pgtest.Database(t)
	p := openPostgres(t, url, key32())
	req := request("old-version")
	c, _, err := p.Claim(ctx, req, 50*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	// The earlier version's owner fence: random, without the prefix.
	if _, err := conn.Exec(ctx, "UPDATE money_requests SET owner = 'b2xkLXZlcnNpb24tb3du' WHERE id = $1", c.ID); err != nil {
		t.Fatal(err)
	}
	time.Sleep(60 * time.Millisecond) // deliberate: the claim's deadline passes on PostgreSQL's clock (now(), the real one)
	if st, err := p.Abandon(ctx, c.ID); st != ledger.StateUnknown || err != nil {
		t.Fatalf("got %q, %v; want unknown", st, err)
	}
}

// An earlier version's re-claim (a rolling upgrade) resets none of the
// settling columns: the evidence they still hold is an earlier attempt's,
// and is never handed to the settler as this one's.
func TestEarlierVersionsReclaimCarriesNoEvidence(t *testing.T) {
	ctx := context.Background()
	url := pgtest.Database(t)
	p := openPostgres(t, url, key32())
	req := request("stale-evidence")
	req.Content = []byte(`{"paymentInformation":{"amount":1}}`)
	c, _, _ := p.Claim(ctx, req, time.Hour)
	old := time.Now().Add(-time.Hour).UTC().Truncate(time.Second)
	if ok, err := p.Sending(ctx, c, ledger.Send{Snapshot: true, SeenFrom: old, WindowEnd: old.Add(time.Minute)}); !ok || err != nil {
		t.Fatal(ok, err)
	}
	if ok, err := p.Release(ctx, c, ledger.Outcome{Ending: ledger.EndRefused, UpstreamStatus: 423}); !ok || err != nil {
		t.Fatal(ok, err)
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var id int64
	// The earlier version's Claim and Unknown, as it wrote them.
	if err := conn.QueryRow(ctx, `INSERT INTO money_requests AS m (user_id, route, idem_key, fingerprint, session_ref, client_ip, request_id, state, owner, deadline, match_key)
VALUES ($1, $2, $3, $4, 's', 'ip', 'r-old', 'in_flight', 'b2xkLXZlcnNpb24tb3du', now() + interval '1 hour', NULL)
ON CONFLICT ON CONSTRAINT money_requests_key DO UPDATE
  SET state = 'in_flight', owner = excluded.owner, attempts = m.attempts + 1, claimed_at = now(), match_key = excluded.match_key,
      deadline = excluded.deadline, finished_at = NULL, ending = NULL, upstream_status = NULL,
      session_ref = excluded.session_ref, client_ip = excluded.client_ip, request_id = excluded.request_id
  WHERE m.state = 'released' AND m.fingerprint = excluded.fingerprint RETURNING id`, req.UserID, req.Route, req.Key, req.Fingerprint).Scan(&id); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `UPDATE money_requests SET state = 'unknown', ending = 'ambiguous', finished_at = now() WHERE id = $1`, id); err != nil {
		t.Fatal(err)
	}
	var sealed []byte
	if err := conn.QueryRow(ctx, "SELECT content FROM money_requests WHERE id = $1", id).Scan(&sealed); err != nil {
		t.Fatal(err)
	}
	if len(sealed) == 0 || bytes.Contains(sealed, []byte("paymentInformation")) || bytes.Contains(sealed, []byte("amount")) {
		t.Fatalf("the request's content is stored readable (or not at all): %q", sealed)
	}
	due, err := p.Due(ctx, 10, time.Hour, time.Hour, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range due {
		if r.ID == id {
			t.Fatalf("the earlier version's attempt was handed to the settler with evidence %+v", r.Send)
		}
	}
	_, rec, err := p.Claim(ctx, req, time.Hour)
	if err != nil || rec == nil || rec.Send.Snapshot || rec.Sent {
		t.Fatalf("got %+v, %v; want the record without the earlier attempt's evidence", rec, err)
	}
}

// A user lists their own records newest first, paged by cursor, and finds
// one by its key; released keys and other users' records never show.
func TestListing(t *testing.T) {
	ctx := context.Background()
	stores(t, func(t *testing.T, s store, wait func(time.Duration)) {
		user := fmt.Sprintf("lister-%d", seq.Add(1))
		claim := func(u, key string) *ledger.Claim {
			t.Helper()
			req := request(key)
			req.UserID, req.Key = u, key
			c, _, err := s.Claim(ctx, req, time.Hour)
			if err != nil || c == nil {
				t.Fatalf("claim %s: got %v, %v", key, c, err)
			}
			wait(time.Millisecond) // distinct created_at on the database's clock
			return c
		}
		done := claim(user, "k-done")
		if ok, err := s.Finish(ctx, done, ledger.Outcome{Ending: ledger.EndAnswered, UpstreamStatus: 201, PaymentID: "01JPAYMENT", Response: created}); !ok || err != nil {
			t.Fatalf("finish: got %v, %v", ok, err)
		}
		released := claim(user, "k-released")
		if ok, err := s.Release(ctx, released, ledger.Outcome{Ending: ledger.EndNotSent}); !ok || err != nil {
			t.Fatalf("release: got %v, %v", ok, err)
		}
		unknown := claim(user, "k-unknown")
		if ok, err := s.Unknown(ctx, unknown, ledger.Outcome{Ending: ledger.EndAmbiguous, UpstreamStatus: 504}); !ok || err != nil {
			t.Fatalf("unknown: got %v, %v", ok, err)
		}
		claim(user, "k-flight")
		claim(user+"-other", "k-done")

		var keys []string
		var after ledger.Cursor
		for page := 0; ; page++ {
			got, err := s.List(ctx, user, after, 2)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) == 0 {
				break
			}
			if page > 3 {
				t.Fatal("the listing never ends")
			}
			for _, e := range got {
				keys = append(keys, e.Key)
			}
			after = got[len(got)-1].Cursor()
		}
		if want := []string{"k-flight", "k-unknown", "k-done"}; fmt.Sprint(keys) != fmt.Sprint(want) {
			t.Fatalf("listed %v, want %v", keys, want)
		}

		e, ok, err := s.Get(ctx, user, "k-done")
		if err != nil || !ok {
			t.Fatalf("get: got %v, %v", ok, err)
		}
		if e.State != ledger.StateDone || e.Answered != 201 || e.UpstreamStatus != 201 || e.PaymentID != "01JPAYMENT" ||
			e.Route != "/v2/payments" || e.UpdatedAt.Before(e.CreatedAt) || e.CreatedAt.IsZero() {
			t.Fatalf("get: got %+v, want done, answered 201, payment 01JPAYMENT", e)
		}
		if e, _, _ := s.Get(ctx, user, "k-unknown"); e.State != ledger.StateUnknown || e.Answered != 0 || e.UpstreamStatus != 504 {
			t.Fatalf("unknown: got %+v", e)
		}
		for _, tc := range []struct{ user, key string }{{user, "k-released"}, {user, "k-none"}, {user + "-other", "k-flight"}} {
			if _, ok, err := s.Get(ctx, tc.user, tc.key); ok || err != nil {
				t.Errorf("get %s of %s: got %v, %v; want none", tc.key, tc.user, ok, err)
			}
		}
		if got, err := s.List(ctx, "nobody", ledger.Cursor{}, 10); len(got) != 0 || err != nil {
			t.Fatalf("an unknown user's list: got %v, %v; want empty", got, err)
		}
	})
}

// The listing reads the user index, not the table.
func TestListingUsesTheUserIndex(t *testing.T) {
	url := pgtest.Database(t)
	openPostgres(t, url, key32())
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "SET enable_seqscan = off"); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`EXPLAIN SELECT id FROM money_requests WHERE user_id = 'u' AND state <> 'released' AND (created_at, id) < (now(), 5) ORDER BY created_at DESC, id DESC LIMIT 3`,
		`EXPLAIN SELECT id FROM money_requests WHERE user_id = 'u' AND idem_key = 'k' AND state <> 'released' ORDER BY created_at DESC, id DESC LIMIT 1`,
	} {
		var plan []string
		rows, err := conn.Query(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var line string
			_ = rows.Scan(&line)
			plan = append(plan, line)
		}
		rows.Close()
		text := fmt.Sprint(plan)
		if !bytes.Contains([]byte(text), []byte("money_requests_user_list")) && !bytes.Contains([]byte(text), []byte("money_requests_user_key")) {
			t.Errorf("plan of %s:\n%s\nwant a user index", q, text)
		}
	}
}
