// Package payments runs the requests that cost money: the money-moving
// POSTs (at most once per Idempotency-Key, recorded in the ledger, settled
// from the upstream when their answer was lost) and the on-demand refresh
// that costs 20 credits (at most one per user per interval). The edge
// dispatches those requests here; payments sends them through the proxy's
// Exchange, one send each, and never the other way round: proxy knows
// nothing of payments.
//
// What each answer proves, and why, is written down in docs/payments.md;
// the code follows that argument and concludes nothing it does not prove.
//
// The package is cut by lifecycle, each part built on its own slice of
// the ledger: the money path (MoneyPath: admit, claim, send as the owner,
// answer a repeat), the recoverer (Recoverer: the background settler), the
// follower (Follower: polls and webhooks), the records (Records: list,
// get, changes, position), their receipts (Receipts) and the holds
// (Holds: held, approve, decline, expire; with step-up off it holds
// nothing, decided in one place, holdRefs.holding). Each part's
// constructor takes only its slice of the ledger, and no part is changed
// after it is built. Evidence gathering is shared by the money path and
// the recoverer. Service puts them together for the edge.
//
// Each file depends only on files before it in this order (checked by
// TestFileOrder):
//
//	labels.go     the results the Observer is told
//	deps.go       what every part shares: Upstream, Observer, base, paths, bounds
//	content.go    what a request asks to create, and what the upstream lists
//	conclude.go   settling's rules: Conclude, a pure function
//	replay.go     a stored answer, kept and written again
//	details.go    the RFC 9396 details an approval binds, and a held request
//	admit.go      admission: a money request read once, or refused
//	evidence.go   evidence gathering, and a conclusion stored (one method)
//	owner.go      the owner's send, one phase per class of end
//	holdrefs.go   the sealed references of holds, and whether step-up is on
//	records.go    the user's records
//	receipt.go    a finished request's signed receipt
//	holds.go      payments the user approves: held, approved, declined, expired
//	money.go      the money path's state and its ledger calls
//	repeat.go     a repeat, one transition per ledger state
//	pay.go        a request led through: admitted, claimed, held, sent or repeated
//	recoverer.go  the background settler
//	follower.go   following a payment's status
//	refresh.go    the refresh under its credit guard
//	payments.go   Service: the parts put together
package payments

import (
	"context"
	"crypto/rand"
	"log/slog"
	"net/http"
	"time"

	"github.com/fintech-bff/bff/internal/ledger"
	"github.com/fintech-bff/bff/internal/problem"
	"github.com/fintech-bff/bff/internal/proxy"
	"github.com/fintech-bff/bff/internal/seal"
	"github.com/fintech-bff/bff/internal/signing"
)

// Ledger is the ledger of money-moving requests as New takes it
// (ledger.Postgres, or ledger.Memory in development; package ledger states
// the protocol): the union of the slices each part is built on.
type Ledger interface {
	ClaimLedger
	EvidenceLedger
	RecoveryLedger
	FollowLedger
	RecordLedger
	HoldLedger
	ExpiryLedger
	ReceiptLedger
}

var (
	_ Ledger = (*ledger.Postgres)(nil)
	_ Ledger = (*ledger.Memory)(nil)
)

// Options configures a Service.
type Options struct {
	Upstream Upstream
	// Timeout is the upstream timeout: a money request's sends end within
	// it, and its claim's deadline is Timeout plus ownerMargin.
	Timeout time.Duration
	// MoneyRoutes are the path prefixes (whole segments) under which a
	// POST moves money: it needs an Idempotency-Key and runs at most once,
	// recorded in Ledger. A money POST with no Ledger is refused.
	MoneyRoutes []string
	Ledger      Ledger
	// Background is the ledger the loops in the background (the
	// recoverer, the follower) use, so that they never take a payment's
	// connection (ledger.Postgres.Background); Ledger when nil.
	Background Ledger
	// Refresh, when set with RefreshEvery > 0, is the credit guard: at most
	// one POST under RefreshPath per user per RefreshEvery. Without it the
	// refresh is still sent once (never resent after a 401).
	Refresh      Guard
	RefreshEvery time.Duration
	Logger       *slog.Logger
	// Observe, when set, is told how each money-moving request ended and
	// of each refresh the credit guard refused (metrics).
	Observe Observer
	// Follow: how payments are followed after their answer (follower.go);
	// the zero value follows none.
	Follow Follow
	// Instance names this process in the request ids of its polls, so an
	// operator (and a test) can tell which instance polled.
	Instance string
	// EncryptionKey (32 bytes) seals the cursors of GET /bff/payments, so
	// a cursor says nothing of the ledger's row ids and opens only for
	// its user; DecryptionKeys open cursors sealed before a rotation.
	// Every instance needs the same key; without one a random key is
	// used, and cursors open only on the instance that made them.
	EncryptionKey  []byte
	DecryptionKeys [][]byte
	// StepUp, when set, holds the payments it names for the user's
	// approval (holds.go); nil: no payment is held.
	StepUp *StepUp
	// ReceiptKeys sign the receipts of payments (receipt.go), Issuer (the
	// BFF's public URL) names who signed; nil keys: no receipts.
	ReceiptKeys *signing.Keys
	Issuer      string
	// ListLag is how long the upstream's payment list may take to show a
	// payment it made: settling concludes "not made" only from a list read
	// at least that long after the request stopped acting.
	ListLag time.Duration
}

// Service is the parts put together: it dispatches the edge's calls to
// the part that owns each. Without a ledger it has only the refresh, and
// every other call is 503 LEDGER_UNAVAILABLE. Safe for concurrent use.
type Service struct {
	routes    *proxy.Routes // the money prefixes, POST only
	refresh   *refresher
	money     *MoneyPath // nil without a ledger, as are the parts below
	recoverer *Recoverer
	follower  *Follower
	records   *Records
	holds     *Holds    // with step-up off, it holds nothing (holdRefs.holding)
	receipts  *Receipts // nil also without receipt keys
}

// New returns a Service.
func New(o Options) *Service {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Observe == nil {
		o.Observe = nopObserver{}
	}
	b := base{up: o.Upstream, log: o.Logger, observe: o.Observe, refused: &refusals{}}
	s := &Service{routes: moneyRoutes(o.MoneyRoutes), refresh: &refresher{base: b, guard: o.Refresh, every: o.RefreshEvery}}
	if o.Ledger == nil {
		return s
	}
	key := o.EncryptionKey
	if key == nil {
		key = make([]byte, 32)
		_, _ = rand.Read(key)
	}
	bg := o.Background
	if bg == nil {
		bg = o.Ledger
	}
	refs := holdRefs{}
	if o.StepUp != nil {
		refs = holdRefs{box: derive(key, "bff step-up holds", o.DecryptionKeys), url: o.StepUp.URL}
	}
	ev := newEvidence(b, o.Ledger, o.ListLag)
	owners := newOwners(b, o.Ledger, ev, o.Timeout)
	s.records = newRecords(o.Ledger, derive(key, "bff payment cursors", o.DecryptionKeys), refs)
	s.receipts = newReceipts(o.Ledger, o.ReceiptKeys, o.Issuer)
	s.holds = newHolds(b, o.Ledger, bg, o.StepUp, refs, s.records, owners, o.Timeout)
	s.money = newMoneyPath(b, o.Ledger, ev, owners, s.holds, o.Timeout)
	s.recoverer = newRecoverer(b, bg, newEvidence(b, bg, o.ListLag), s.holds)
	s.follower = newFollower(b, bg, o.Ledger, o.Follow, o.Instance)
	return s
}

// derive is the seal.Box of key for purpose.
func derive(key []byte, purpose string, old [][]byte) *seal.Box {
	box, err := seal.Derive(key, purpose, old...)
	if err != nil {
		// HKDF fails only when asked for more than 255 hashes of key; a
		// 32-byte key never is.
		panic(err)
	}
	return box
}

// moneyRoutes are the money prefixes, POST only.
func moneyRoutes(prefixes []string) *proxy.Routes {
	routes := make([]proxy.Route, len(prefixes))
	for i, p := range prefixes {
		routes[i] = proxy.Route{Prefix: p, Methods: []string{http.MethodPost}}
	}
	return proxy.NewRoutes(routes)
}

// Handles reports whether a call to t with method is payments' to serve: a
// POST under a money route or under the refresh route, and, with step-up
// on, a change of a merchant.
func (s *Service) Handles(t proxy.Target, method string) bool {
	switch {
	case s.holds != nil && s.holds.policy.changes(t.Path, method):
		return true
	case method != http.MethodPost:
		return false
	case underRefresh(t.Path):
		return true
	}
	_, ok := s.routes.Under(t.Path)
	return ok
}

// Serve runs one call that Handles accepted. Like proxy.Forward, it writes
// to w only an answer (the upstream's, or a stored one replayed) and
// returns a failure, a *problem.Problem, for the caller to render.
func (s *Service) Serve(w http.ResponseWriter, r *http.Request, c proxy.Call, t proxy.Target) (proxy.Result, error) {
	res := proxy.Result{Route: t.Route}
	var p *problem.Problem
	switch {
	case underRefresh(t.Path):
		res.UpstreamStatus, p = s.refresh.serve(w, r, c, t)
	case s.money == nil:
		p = noLedger()
	default:
		route, _ := s.routes.Under(t.Path)
		var out labels
		out, p = s.money.serve(w, r, c, t, route, s.holds.policy.changes(t.Path, r.Method))
		res.UpstreamStatus, res.Code = out.upstreamStatus, out.replayedCode
	}
	if p != nil {
		return res, p
	}
	return res, nil
}

// Run settles unknown outcomes in the background until ctx ends
// (Recoverer.Run); without a ledger it returns at once.
func (s *Service) Run(ctx context.Context) {
	if s.recoverer != nil {
		s.recoverer.Run(ctx)
	}
}

// RunFollow follows payments until ctx ends (Follower.Run); without a
// ledger it returns at once.
func (s *Service) RunFollow(ctx context.Context) {
	if s.follower != nil {
		s.follower.Run(ctx)
	}
}

// StatusPushed stores a status the upstream pushed (Follower.StatusPushed).
func (s *Service) StatusPushed(ctx context.Context, deliveryID string, u StatusUpdate) (Delivery, error) {
	if s.follower == nil {
		return 0, noLedger()
	}
	return s.follower.StatusPushed(ctx, deliveryID, u)
}

// Records returns a page of the user's records (Records.Records).
func (s *Service) Records(ctx context.Context, userID, cursor string, limit int) (Page, error) {
	if s.records == nil {
		return Page{}, noLedger()
	}
	return s.records.Records(ctx, userID, cursor, limit)
}

// Record returns the user's record with key (Records.Record).
func (s *Service) Record(ctx context.Context, userID, key string) (Record, error) {
	if s.records == nil {
		return Record{}, noLedger()
	}
	return s.records.Record(ctx, userID, key)
}

// Receipt is the signed receipt of the user's request with key
// (Receipts.Receipt).
func (s *Service) Receipt(ctx context.Context, userID, key string) (string, error) {
	if s.receipts == nil {
		return "", noLedger()
	}
	return s.receipts.Receipt(ctx, userID, key)
}

// ReceiptJWKS is the receipts' public keys, or nil without receipts.
func (s *Service) ReceiptJWKS() []byte {
	if s.receipts == nil {
		return nil
	}
	return s.receipts.JWKS()
}

// Changes returns the user's records changed after a position
// (Records.Changes).
func (s *Service) Changes(ctx context.Context, userID string, after int64) ([]Change, error) {
	if s.records == nil {
		return nil, noLedger()
	}
	return s.records.Changes(ctx, userID, after)
}

// Position is the user's latest position (Records.Position).
func (s *Service) Position(ctx context.Context, userID string) (int64, error) {
	if s.records == nil {
		return 0, noLedger()
	}
	return s.records.Position(ctx, userID)
}

// HeldPayment opens a step-up reference (Holds.HeldPayment).
func (s *Service) HeldPayment(ctx context.Context, ref string) (Hold, *problem.Problem) {
	if s.holds == nil {
		return Hold{}, notHeld()
	}
	return s.holds.HeldPayment(ctx, ref)
}

// Approve releases the hold ref names, when the approval matches it
// (Holds.Approve).
func (s *Service) Approve(ctx context.Context, ref, userID, sessionRef string, a Approval) (Record, *problem.Problem) {
	if s.holds == nil {
		return Record{}, notHeld()
	}
	return s.holds.Approve(ctx, ref, userID, sessionRef, a)
}

// DeclineHold ends the hold ref names without a send (Holds.DeclineHold).
func (s *Service) DeclineHold(ctx context.Context, ref, userID, sessionRef string) (Declined, error) {
	if s.holds == nil {
		return Declined{}, notHeld()
	}
	return s.holds.DeclineHold(ctx, ref, userID, sessionRef)
}

// notHeld is the answer to a step-up reference without a ledger: nothing
// is held here.
func notHeld() *problem.Problem {
	return problem.New(problem.CodeNotFound, "payments are not held for approval here")
}
