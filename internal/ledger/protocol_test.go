package ledger_test

// The protocol both ledgers keep (ledger.go), tested once for both: every
// test here takes a store, and stores runs it against each backend. Without
// a build tag the backend is Memory alone, so `go test ./internal/ledger/`
// needs nothing but Go; with the integration tag, ledger_test.go adds
// PostgreSQL (pgtest), and the same bodies run against it too.

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

	"github.com/fintech-bff/bff/internal/ledger"
)

// store is the protocol both ledgers implement: what payments drives (its
// Ledger, method for method: the tests of the ledger build without the
// packages above it), what the metrics read, and a ping.
type store interface {
	// The money path (payments.ClaimLedger).
	Claim(ctx context.Context, req ledger.Request, bound time.Duration) (*ledger.Claim, *ledger.Record, error)
	Sending(ctx context.Context, c *ledger.Claim, s ledger.SendEvidence) (bool, error)
	Finish(ctx context.Context, c *ledger.Claim, o ledger.Outcome) (bool, error)
	Release(ctx context.Context, c *ledger.Claim, o ledger.Outcome) (bool, error)
	Unknown(ctx context.Context, c *ledger.Claim, o ledger.Outcome) (bool, error)
	Abandon(ctx context.Context, id int64) (ledger.State, error)
	Event(ctx context.Context, id int64, req ledger.Request, what ledger.AuditEvent) error
	// Settling (payments.EvidenceLedger, RecoveryLedger).
	Others(ctx context.Context, userID string, except int64, since time.Time, ids []string) ([]ledger.OtherRequest, error)
	Settle(ctx context.Context, id int64, o ledger.Outcome) (bool, error)
	GiveBack(ctx context.Context, id int64) (bool, error)
	Due(ctx context.Context, limit int, lease, maxLease, giveUp time.Duration) ([]*ledger.Record, error)
	// The user's records and their stream (payments.RecordLedger).
	List(ctx context.Context, userID string, after ledger.Cursor, limit int) ([]ledger.Entry, error)
	Get(ctx context.Context, userID, key string) (ledger.Entry, bool, error)
	Facts(ctx context.Context, userID, key string) (ledger.Facts, bool, error)
	Changes(ctx context.Context, userID string, after int64, limit int) ([]ledger.Entry, error)
	Position(ctx context.Context, userID string) (int64, error)
	// Following (payments.FollowLedger).
	Watches(ctx context.Context, limit int, lease time.Duration) ([]ledger.Watch, error)
	Watched(ctx context.Context, w ledger.Watch, o ledger.Observed) (ledger.StatusWrite, error)
	Webhook(ctx context.Context, deliveryID string, u ledger.StatusUpdate, later time.Duration) (ledger.Delivery, ledger.StatusWrite, error)
	PruneDeliveries(ctx context.Context, age time.Duration) error
	// Holds (payments.HoldLedger).
	Record(ctx context.Context, id int64) (*ledger.Record, error)
	Approve(ctx context.Context, id int64, bound time.Duration, proof ledger.Approval) (*ledger.Claim, error)
	Decline(ctx context.Context, id int64, ending string) (bool, error)
	ExpireHolds(ctx context.Context) (int64, error)

	Unknowns(ctx context.Context) (int64, time.Time, error)
	Ping(ctx context.Context) error
}

var (
	_ store = (*ledger.Postgres)(nil)
	_ store = (*ledger.Memory)(nil)
)

// backend is a ledger the shared tests run against: open returns a new,
// empty one for t and a wait that lets d pass on its clock.
type backend struct {
	name string
	open func(t *testing.T) (s store, wait func(d time.Duration))
}

// backends are the ledgers stores runs every test against: Memory always;
// PostgreSQL too with the integration tag (ledger_test.go adds it).
var backends = []backend{{"memory", openMemory}}

func openMemory(t *testing.T) (store, func(time.Duration)) {
	t.Helper()
	now, wait := ticking()
	m, err := ledger.NewMemory(now, key32(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return m, wait
}

// stores runs f against every backend, each in a subtest of its name.
func stores(t *testing.T, f func(t *testing.T, s store, wait func(time.Duration))) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			s, wait := b.open(t)
			f(t, s, wait)
		})
	}
}

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

// lapse is the bound of a claim a test lets pass: long enough for the claim
// and its mark on a loaded machine under the race detector, where
// PostgreSQL's clock is the real one.
const lapse = 300 * time.Millisecond

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
			if ok, err := s.Sending(ctx, c, ledger.SendEvidence{}); !ok || err != nil {
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
			if ok, _ := s.Sending(ctx, c, ledger.SendEvidence{}); ok {
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
			if ok, _ := s.Sending(ctx, c, ledger.SendEvidence{}); ok {
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
			_, _ = s.Sending(ctx, unknown, ledger.SendEvidence{Snapshot: true, SeenBefore: []string{"01JOLD"}})
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
			if ok, err := s.Sending(ctx, cb, ledger.SendEvidence{Snapshot: true}); !ok || err != nil {
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
			byKey := map[string]ledger.OtherRequest{}
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
			_, _ = s.Sending(ctx, c, ledger.SendEvidence{Snapshot: true})
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

// A key is scoped to its user and route; a repeat never claims a key that
// is not released, and gets the record as it stands, whose fingerprint
// (the first request's, never replaced) tells the caller whether the key
// is reused for another request; a released key re-claimed starts clean.
func TestClaimRepeats(t *testing.T) {
	ctx := context.Background()
	stores(t, func(t *testing.T, s store, wait func(time.Duration)) {
		t.Run("the same key for another user or another route is another claim", func(t *testing.T) {
			req := request("scope")
			c, _, err := s.Claim(ctx, req, time.Hour)
			if err != nil || c == nil {
				t.Fatalf("claim: got %v, %v", c, err)
			}
			otherUser, otherRoute := req, req
			otherUser.UserID = fmt.Sprintf("bob-%d", seq.Add(1))
			otherRoute.Route = "/v2/pay"
			for _, r := range []ledger.Request{otherUser, otherRoute} {
				c2, rec, err := s.Claim(ctx, r, time.Hour)
				if err != nil || c2 == nil || rec != nil || c2.ID == c.ID {
					t.Fatalf("claim of %s %s: got %+v, %+v, %v; want a claim of its own", r.UserID, r.Route, c2, rec, err)
				}
			}
		})

		t.Run("a repeat with another body is never a claim, in any state, and the fingerprint stays the first", func(t *testing.T) {
			other := bytes.Repeat([]byte{7}, 32)
			for _, end := range []struct {
				state ledger.State
				end   func(c *ledger.Claim) (bool, error)
			}{
				{ledger.StateInFlight, func(*ledger.Claim) (bool, error) { return true, nil }},
				{ledger.StateDone, func(c *ledger.Claim) (bool, error) {
					return s.Finish(ctx, c, ledger.Outcome{Ending: ledger.EndAnswered, UpstreamStatus: 201, PaymentID: "01JFIRST", Response: created})
				}},
				{ledger.StateUnknown, func(c *ledger.Claim) (bool, error) {
					return s.Unknown(ctx, c, ledger.Outcome{Ending: ledger.EndAmbiguous})
				}},
			} {
				req := request("reuse")
				c, _, _ := s.Claim(ctx, req, time.Hour)
				if ok, err := end.end(c); !ok || err != nil {
					t.Fatalf("%s: got %v, %v", end.state, ok, err)
				}
				reused := req
				reused.Fingerprint = other
				c2, rec, err := s.Claim(ctx, reused, time.Hour)
				if err != nil || c2 != nil || rec == nil {
					t.Fatalf("%s, another body: got %+v, %+v, %v; want the record", end.state, c2, rec, err)
				}
				if rec.ID != c.ID || rec.State != end.state || !bytes.Equal(rec.Fingerprint, req.Fingerprint) {
					t.Fatalf("%s, another body: got record %d in %s with fingerprint %x; want %d, %s, the first request's",
						end.state, rec.ID, rec.State, rec.Fingerprint, c.ID, end.state)
				}
				if end.state == ledger.StateDone && (rec.PaymentID != "01JFIRST" || rec.Response == nil || rec.Response.Status != 201) {
					t.Fatalf("done, another body: got %+v; want the first answer", rec)
				}
			}
		})

		t.Run("a released key claimed again carries nothing of the attempt before", func(t *testing.T) {
			req := request("again")
			req.Content = []byte(`{"paymentInformation":{"amount":5}}`)
			c, _, _ := s.Claim(ctx, req, time.Hour)
			if ok, err := s.Sending(ctx, c, ledger.SendEvidence{Snapshot: true, SeenBefore: []string{"01JSEEN"}}); !ok || err != nil {
				t.Fatalf("mark: got %v, %v", ok, err)
			}
			if ok, err := s.Release(ctx, c, ledger.Outcome{Ending: ledger.EndRefused, UpstreamStatus: 423}); !ok || err != nil {
				t.Fatalf("release: got %v, %v", ok, err)
			}
			again := req
			again.Content, again.RequestID = nil, "req-2"
			c2, _, err := s.Claim(ctx, again, time.Hour)
			if err != nil || c2 == nil || c2.ID != c.ID {
				t.Fatalf("re-claim: got %+v, %v; want a claim of the same record", c2, err)
			}
			rec, err := s.Record(ctx, c2.ID)
			if err != nil {
				t.Fatal(err)
			}
			if rec.State != ledger.StateInFlight || rec.Sent || rec.Send.Snapshot || len(rec.Send.SeenBefore) != 0 ||
				rec.Ending != "" || rec.UpstreamStatus != 0 || rec.Content != nil || rec.RequestID != "req-2" {
				t.Fatalf("got %+v; want in flight, unsent, without the earlier attempt's evidence, ending, status or content", rec)
			}
		})

		t.Run("a record that does not exist is ErrNoRecord", func(t *testing.T) {
			if rec, err := s.Record(ctx, 1<<40); rec != nil || !errors.Is(err, ledger.ErrNoRecord) {
				t.Fatalf("got %+v, %v; want ErrNoRecord", rec, err)
			}
		})

		t.Run("an in-flight bound that is not positive is refused", func(t *testing.T) {
			for _, d := range []time.Duration{0, -time.Second} {
				if c, rec, err := s.Claim(ctx, request("bound"), d); c != nil || rec != nil || err == nil {
					t.Fatalf("bound %v: got %v, %v, %v; want an error", d, c, rec, err)
				}
			}
		})
	})
}

// The send mark (Sending) is the owner's, before its deadline, on a record
// in flight: it carries the evidence settling reads to the record, may be
// written again by the same owner (a resend of the same attempt), and is
// refused to an owner whose claim was ended or taken by another.
func TestSendMark(t *testing.T) {
	ctx := context.Background()
	stores(t, func(t *testing.T, s store, wait func(time.Duration)) {
		t.Run("the mark carries the evidence to the record", func(t *testing.T) {
			req := request("mark")
			req.Content = []byte(`{"paymentInformation":{"amount":9}}`)
			c, _, _ := s.Claim(ctx, req, time.Hour)
			if rec, _ := s.Record(ctx, c.ID); rec.Sent {
				t.Fatal("a claim is marked sent before its mark")
			}
			from := time.Date(2026, 11, 22, 11, 0, 0, 0, time.UTC)
			send := ledger.SendEvidence{Snapshot: true, SeenBefore: []string{"01JA", "01JB"}, SeenFrom: from,
				SeenCut: from.Add(-time.Hour), WindowEnd: from.Add(time.Minute)}
			if ok, err := s.Sending(ctx, c, send); !ok || err != nil {
				t.Fatalf("mark: got %v, %v", ok, err)
			}
			rec, err := s.Record(ctx, c.ID)
			if err != nil {
				t.Fatal(err)
			}
			got := rec.Send
			if !rec.Sent || rec.State != ledger.StateInFlight || !got.Snapshot || fmt.Sprint(got.SeenBefore) != "[01JA 01JB]" ||
				!got.SeenFrom.Equal(send.SeenFrom) || !got.SeenCut.Equal(send.SeenCut) || !got.WindowEnd.Equal(send.WindowEnd) ||
				string(rec.Content) != string(req.Content) {
				t.Fatalf("got sent %v, %+v, content %q; want the evidence as marked", rec.Sent, got, rec.Content)
			}
			send.SeenBefore[0] = "01JCHANGED" // the caller's slice is not the record's
			if rec, _ := s.Record(ctx, c.ID); rec.Send.SeenBefore[0] != "01JA" {
				t.Fatalf("the record's evidence changed with the caller's slice: %v", rec.Send.SeenBefore)
			}
			if ok, err := s.Sending(ctx, c, ledger.SendEvidence{Snapshot: true}); !ok || err != nil {
				t.Fatalf("the owner's second mark: got %v, %v; want it written", ok, err)
			}
		})

		t.Run("an owner whose claim was released and taken again cannot mark, finish or end it", func(t *testing.T) {
			req := request("stale owner")
			c, _, _ := s.Claim(ctx, req, time.Hour)
			_, _ = s.Release(ctx, c, ledger.Outcome{Ending: ledger.EndNotSent})
			if ok, _ := s.Sending(ctx, c, ledger.SendEvidence{}); ok {
				t.Fatal("a released claim was marked sent")
			}
			c2, _, _ := s.Claim(ctx, req, time.Hour)
			if c2 == nil {
				t.Fatal("the released key was not claimed again")
			}
			stale := []struct {
				name string
				op   func() (bool, error)
			}{
				{"Sending", func() (bool, error) { return s.Sending(ctx, c, ledger.SendEvidence{}) }},
				{"Finish", func() (bool, error) {
					return s.Finish(ctx, c, ledger.Outcome{Ending: ledger.EndAnswered, PaymentID: "01JSTALE"})
				}},
				{"Release", func() (bool, error) { return s.Release(ctx, c, ledger.Outcome{Ending: ledger.EndNotSent}) }},
				{"Unknown", func() (bool, error) { return s.Unknown(ctx, c, ledger.Outcome{Ending: ledger.EndAmbiguous}) }},
			}
			for _, op := range stale {
				if ok, err := op.op(); ok || err != nil {
					t.Fatalf("%s by the earlier owner: got %v, %v; want refused", op.name, ok, err)
				}
			}
			rec, _ := s.Record(ctx, c2.ID)
			if rec.State != ledger.StateInFlight || rec.Sent || rec.PaymentID != "" {
				t.Fatalf("got %+v; want the new claim's record untouched", rec)
			}
			if ok, err := s.Sending(ctx, c2, ledger.SendEvidence{}); !ok || err != nil {
				t.Fatalf("the new owner's mark: got %v, %v", ok, err)
			}
		})

		t.Run("a claim lost past its deadline: no mark, and the late owner's answer lands only if it was sent", func(t *testing.T) {
			unsent, _, _ := s.Claim(ctx, request("lost unsent"), lapse)
			sent, _, _ := s.Claim(ctx, request("lost sent"), lapse)
			if ok, err := s.Sending(ctx, sent, ledger.SendEvidence{}); !ok || err != nil {
				t.Fatalf("mark: got %v, %v", ok, err)
			}
			wait(lapse + 10*time.Millisecond)
			for _, c := range []*ledger.Claim{unsent, sent} {
				if ok, _ := s.Sending(ctx, c, ledger.SendEvidence{}); ok {
					t.Fatalf("record %d: a mark past the deadline was written", c.ID)
				}
			}
			if st, _ := s.Abandon(ctx, unsent.ID); st != ledger.StateReleased {
				t.Fatalf("abandon unsent: got %q, want released", st)
			}
			if st, _ := s.Abandon(ctx, sent.ID); st != ledger.StateUnknown {
				t.Fatalf("abandon sent: got %q, want unknown", st)
			}
			for _, c := range []*ledger.Claim{unsent, sent} {
				if st, err := s.Abandon(ctx, c.ID); st != "" || err != nil {
					t.Fatalf("record %d abandoned twice: got %q, %v", c.ID, st, err)
				}
			}
			// The unsent claim was given back: its owner (it never sent) may
			// not store an answer; the sent one's late answer lands.
			if ok, _ := s.Finish(ctx, unsent, ledger.Outcome{Ending: ledger.EndAnswered, PaymentID: "01JGHOST"}); ok {
				t.Fatal("the owner of a given-back claim stored an answer")
			}
			if ok, _ := s.Finish(ctx, sent, ledger.Outcome{Ending: ledger.EndAnswered, UpstreamStatus: 201, PaymentID: "01JLATE", Response: created}); !ok {
				t.Fatal("the late owner of a sent claim could not store its answer")
			}
			if rec, _ := s.Record(ctx, unsent.ID); rec.State != ledger.StateReleased || rec.Ending != ledger.EndNeverSent || rec.PaymentID != "" {
				t.Fatalf("the given-back record: got %+v", rec)
			}
		})
	})
}

// TestTransitions: every operation on a record in every state, each on a
// record of its own: which are taken (and to what state and ending) and
// which are refused (the record unchanged). The owner's operations use the
// claim that made the state (the approval's, once a hold is approved).
func TestTransitions(t *testing.T) {
	ctx := context.Background()
	type op string
	const (
		sending  op = "Sending"
		finish   op = "Finish"
		release  op = "Release"
		unknown  op = "Unknown"
		settle   op = "Settle"
		giveBack op = "GiveBack"
		abandon  op = "Abandon"
		approve  op = "Approve"
		decline  op = "Decline"
	)
	ops := []op{sending, finish, release, unknown, settle, giveBack, abandon, approve, decline}
	type after struct {
		state  ledger.State
		ending string
	}
	// taken lists what the owner of a claim in flight may do, with more.
	owned := func(more map[op]after) map[op]after {
		m := map[op]after{
			finish:  {ledger.StateDone, ledger.EndAnswered},
			release: {ledger.StateReleased, ledger.EndRefused},
			unknown: {ledger.StateUnknown, ledger.EndAmbiguous},
		}
		for k, v := range more {
			m[k] = v
		}
		return m
	}
	marks := map[op]after{sending: {ledger.StateInFlight, ""}}
	// An unknown record takes its owner's late answer, its settling, or
	// its giving back: nothing else.
	unknowns := map[op]after{
		finish:   {ledger.StateDone, ledger.EndAnswered},
		settle:   {ledger.StateDone, ledger.EndSettled},
		giveBack: {ledger.StateReleased, ledger.EndNotMade},
	}
	type setter func(t *testing.T, s store, c *ledger.Claim) *ledger.Claim
	cases := []struct {
		name    string
		held    bool // claimed held for approval
		marked  bool // the send marked at once
		expires bool // claimed for lapse, then that passes
		set     setter
		taken   map[op]after // the operations taken, and what they make; every other is refused
	}{
		{name: "in flight", taken: owned(marks)},
		{name: "in flight, marked", marked: true, taken: owned(marks)},
		{name: "in flight past its deadline, unmarked", expires: true,
			taken: owned(map[op]after{abandon: {ledger.StateReleased, ledger.EndNeverSent}})},
		{name: "in flight past its deadline, marked", marked: true, expires: true,
			taken: owned(map[op]after{abandon: {ledger.StateUnknown, ledger.EndOwnerLost}})},
		{name: "done", set: func(t *testing.T, s store, c *ledger.Claim) *ledger.Claim {
			mustOK(t, "finish")(s.Finish(ctx, c, ledger.Outcome{Ending: ledger.EndAnswered, UpstreamStatus: 201, PaymentID: "01JDONE", Response: created}))
			return c
		}},
		{name: "released", set: func(t *testing.T, s store, c *ledger.Claim) *ledger.Claim {
			mustOK(t, "release")(s.Release(ctx, c, ledger.Outcome{Ending: ledger.EndNotSent}))
			return c
		}},
		{name: "unknown", marked: true, set: func(t *testing.T, s store, c *ledger.Claim) *ledger.Claim {
			mustOK(t, "unknown")(s.Unknown(ctx, c, ledger.Outcome{Ending: ledger.EndAmbiguous, UpstreamStatus: 504}))
			return c
		}, taken: unknowns},
		{name: "settled", marked: true, set: func(t *testing.T, s store, c *ledger.Claim) *ledger.Claim {
			mustOK(t, "unknown")(s.Unknown(ctx, c, ledger.Outcome{Ending: ledger.EndAmbiguous}))
			mustOK(t, "settle")(s.Settle(ctx, c.ID, ledger.Outcome{UpstreamStatus: 201, PaymentID: "01JSETTLED", Response: created}))
			return c
		}},
		{name: "given back", marked: true, set: func(t *testing.T, s store, c *ledger.Claim) *ledger.Claim {
			mustOK(t, "unknown")(s.Unknown(ctx, c, ledger.Outcome{Ending: ledger.EndAmbiguous}))
			mustOK(t, "give back")(s.GiveBack(ctx, c.ID))
			return c
		}},
		{name: "abandoned unmarked", expires: true, set: abandoned(ledger.StateReleased)},
		{name: "abandoned after its mark", marked: true, expires: true, set: abandoned(ledger.StateUnknown), taken: unknowns},
		{name: "held", held: true, taken: map[op]after{
			approve: {ledger.StateInFlight, ""},
			decline: {ledger.StateDeclined, ledger.EndDenied},
		}},
		{name: "held past its time", held: true, expires: true, taken: map[op]after{decline: {ledger.StateDeclined, ledger.EndDenied}}},
		{name: "declined", held: true, set: func(t *testing.T, s store, c *ledger.Claim) *ledger.Claim {
			mustOK(t, "decline")(s.Decline(ctx, c.ID, ledger.EndMismatch))
			return c
		}},
		{name: "approved", held: true, set: func(t *testing.T, s store, c *ledger.Claim) *ledger.Claim {
			a, err := s.Approve(ctx, c.ID, time.Hour, ledger.Approval{})
			if err != nil || a == nil {
				t.Fatalf("approve: got %v, %v", a, err)
			}
			return a
		}, taken: owned(marks)},
	}
	// One ledger for all the cases (one database each run): every case's
	// records are its own.
	stores(t, func(t *testing.T, s store, wait func(time.Duration)) {
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				bound := time.Hour
				if tc.expires {
					bound = lapse
				}
				claims := map[op]*ledger.Claim{}
				for _, o := range ops {
					req := request("transition")
					if tc.held {
						req.Held = []byte(`{"p":"/v2/payments"}`)
					}
					c, _, err := s.Claim(ctx, req, bound)
					if err != nil || c == nil {
						t.Fatalf("claim: got %v, %v", c, err)
					}
					if tc.marked {
						mustOK(t, "mark")(s.Sending(ctx, c, ledger.SendEvidence{}))
					}
					claims[o] = c
				}
				if tc.expires {
					wait(lapse + 10*time.Millisecond) // the deadlines pass on the store's clock
				}
				for _, o := range ops {
					c := claims[o]
					if tc.set != nil {
						c = tc.set(t, s, c)
					}
					before, err := s.Record(ctx, c.ID)
					if err != nil {
						t.Fatal(err)
					}
					var ok bool
					switch o {
					case sending:
						ok, err = s.Sending(ctx, c, ledger.SendEvidence{})
					case finish:
						ok, err = s.Finish(ctx, c, ledger.Outcome{Ending: ledger.EndAnswered, UpstreamStatus: 201, PaymentID: "01JFINISHED", Response: created})
					case release:
						ok, err = s.Release(ctx, c, ledger.Outcome{Ending: ledger.EndRefused, UpstreamStatus: 423})
					case unknown:
						ok, err = s.Unknown(ctx, c, ledger.Outcome{Ending: ledger.EndAmbiguous})
					case settle:
						ok, err = s.Settle(ctx, c.ID, ledger.Outcome{UpstreamStatus: 201, PaymentID: "01JSETTLING", Response: created})
					case giveBack:
						ok, err = s.GiveBack(ctx, c.ID)
					case abandon:
						var to ledger.State
						to, err = s.Abandon(ctx, c.ID)
						ok = to != ""
						if ok && to != tc.taken[o].state {
							t.Errorf("Abandon returned %q, want %q", to, tc.taken[o].state)
						}
					case approve:
						var a *ledger.Claim
						a, err = s.Approve(ctx, c.ID, time.Hour, ledger.Approval{})
						ok = a != nil
					case decline:
						ok, err = s.Decline(ctx, c.ID, ledger.EndDenied)
					}
					if err != nil {
						t.Fatalf("%s: %v", o, err)
					}
					rec, err := s.Record(ctx, c.ID)
					if err != nil {
						t.Fatal(err)
					}
					want, taken := tc.taken[o]
					switch {
					case ok != taken:
						t.Errorf("%s: got taken %v, want %v (the record is %s/%q)", o, ok, taken, rec.State, rec.Ending)
					case taken && (rec.State != want.state || rec.Ending != want.ending):
						t.Errorf("%s: got %s/%q, want %s/%q", o, rec.State, rec.Ending, want.state, want.ending)
					case !taken && !unchanged(before, rec):
						t.Errorf("%s was refused but changed the record: got %+v, was %+v", o, rec, before)
					}
				}
			})
		}
	})
}

// mustOK fails t unless the operation what was taken without an error.
func mustOK(t *testing.T, what string) func(bool, error) {
	return func(ok bool, err error) {
		t.Helper()
		if !ok || err != nil {
			t.Fatalf("%s: got %v, %v; want it taken", what, ok, err)
		}
	}
}

// abandoned abandons a claim past its deadline, to the state want.
func abandoned(want ledger.State) func(t *testing.T, s store, c *ledger.Claim) *ledger.Claim {
	return func(t *testing.T, s store, c *ledger.Claim) *ledger.Claim {
		t.Helper()
		if st, err := s.Abandon(context.Background(), c.ID); st != want || err != nil {
			t.Fatalf("abandon: got %q, %v; want %s", st, err, want)
		}
		return c
	}
}

// unchanged reports whether b is record a as it was: what an operation
// refused must leave alone.
func unchanged(a, b *ledger.Record) bool {
	return a.State == b.State && a.Ending == b.Ending && a.PaymentID == b.PaymentID && a.UpstreamStatus == b.UpstreamStatus &&
		a.Sent == b.Sent && a.Deadline.Equal(b.Deadline) && a.ClaimedAt.Equal(b.ClaimedAt) &&
		(a.Response == nil) == (b.Response == nil) && (a.Response == nil || bytes.Equal(a.Response.Body, b.Response.Body))
}
