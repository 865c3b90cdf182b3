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
package payments

import (
	"context"
	"crypto/rand"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/fintech-bff/bff/internal/ledger"
	"github.com/fintech-bff/bff/internal/limits"
	"github.com/fintech-bff/bff/internal/problem"
	"github.com/fintech-bff/bff/internal/proxy"
	"github.com/fintech-bff/bff/internal/seal"
)

// Ledger is the ledger of money-moving requests as New takes it
// (ledger.Postgres, or ledger.Memory in development; package ledger states
// the protocol): the union of the small interfaces each part of payments
// uses, and the Service keeps each part to its own.
type Ledger interface {
	Claims      // the money path: money.go
	Settlements // settling and the settler: settle.go, settler.go
	Entries     // GET /bff/payments and the event stream: records.go
	Follower    // following a payment's status: follow.go
	Holds       // payments the user approves: stepup.go
}

var (
	_ Ledger = (*ledger.Postgres)(nil)
	_ Ledger = (*ledger.Memory)(nil)
)

// Upstream is what payments needs of the proxy: the request body, read
// within its bound, and one exchange with the upstream.
type Upstream interface {
	Body(r *http.Request) ([]byte, *problem.Problem)
	Exchange(ctx context.Context, x proxy.Exchange) (proxy.Reply, *problem.Problem)
}

var _ Upstream = (*proxy.Forwarder)(nil)

// Guard holds a key for an interval (limits.Redis, limits.Local).
type Guard interface {
	Hold(ctx context.Context, key string, every time.Duration) (limits.Decision, error)
	Release(ctx context.Context, key, token string) error
}

// RefreshPath is the on-demand refresh, the route that costs credits. The
// guard holds for every path under it.
const RefreshPath = "/chat/chat/connections/refresh"

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
	// Refresh, when set with RefreshEvery > 0, is the credit guard: at most
	// one POST under RefreshPath per user per RefreshEvery. Without it the
	// refresh is still sent once (never resent after a 401).
	Refresh      Guard
	RefreshEvery time.Duration
	Logger       *slog.Logger
	// Observe, when set, is told how each money-moving request ended and
	// of each refresh the credit guard refused (metrics).
	Observe Observer
	// Follow: how payments are followed after their answer (follow.go);
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
	// approval (stepup.go); nil: no payment is held.
	StepUp *StepUp
	// ListLag is how long the upstream's payment list may take to show a
	// payment it made: settling concludes "not made" only from a list read
	// at least that long after the request stopped acting.
	ListLag time.Duration
}

// Observer receives a Service's events. Implementations must be cheap and
// safe for concurrent use.
type Observer interface {
	// MoneyRequest reports how a money-moving request was answered, or
	// how the settler ended one: answered, released, unknown (502
	// PAYMENT_OUTCOME_UNKNOWN to the request that sent it), settled (by
	// the owner, or a repeat of a settled key), replayed, in_progress,
	// outcome_unknown (a repeat of an unknown key), not_made (a repeat
	// of an unknown key proved not made, then run), key_reused,
	// key_required, key_invalid, route_refused, body_refused,
	// ledger_unavailable, claim_lost, snapshot_failed, resent_after_401,
	// released_unsent (an owner that died before its send mark),
	// settled_background, not_made_background; and for payments the user
	// approves: held, approved, declined_denied, declined_mismatch,
	// declined_expired.
	MoneyRequest(result MoneyResult)
	// Followed reports a poll of a followed payment: changed, unchanged,
	// not_found, failed, lease_lost; or a webhook stored: webhook_applied,
	// webhook_unmatched, webhook_replayed (those the edge answers alone
	// are the edge's Observer's).
	Followed(result FollowResult)
	// Refused reports a request a limit refused before it reached the
	// upstream: limit is "refresh" (the credit guard).
	Refused(limit string)
}

type nopObserver struct{}

func (nopObserver) MoneyRequest(MoneyResult) {}
func (nopObserver) Refused(string)           {}
func (nopObserver) Followed(FollowResult)    {}

// Service serves money-moving requests and the refresh. Safe for
// concurrent use.
type Service struct {
	up       Upstream
	timeout  time.Duration
	money    *proxy.Routes // the money prefixes, POST only
	refresh  Guard
	every    time.Duration
	log      *slog.Logger
	observe  Observer
	pace     settlerPace
	follow   Follow
	instance string
	// The ledger's parts, each nil without a ledger.
	claims      Claims
	settlements Settlements
	entries     Entries
	follower    Follower
	holdsOf     Holds
	cursors     *seal.Box
	stepUp      *StepUp
	holdBox     *seal.Box // seals the references of held payments
	listLag     time.Duration
}

// New returns a Service.
func New(o Options) *Service {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Observe == nil {
		o.Observe = nopObserver{}
	}
	money := make([]proxy.Route, len(o.MoneyRoutes))
	for i, p := range o.MoneyRoutes {
		money[i] = proxy.Route{Prefix: p, Methods: []string{http.MethodPost}}
	}
	s := &Service{up: o.Upstream, timeout: o.Timeout, money: proxy.NewRoutes(money),
		refresh: o.Refresh, every: o.RefreshEvery, log: o.Logger, observe: o.Observe, listLag: o.ListLag}
	s.pace = defaultSettlerPace
	if o.Ledger != nil {
		s.claims, s.settlements, s.entries, s.follower, s.holdsOf = o.Ledger, o.Ledger, o.Ledger, o.Ledger, o.Ledger
		s.follow = o.Follow
		s.stepUp = o.StepUp
	}
	s.instance = o.Instance
	key := o.EncryptionKey
	if key == nil {
		key = make([]byte, 32)
		_, _ = rand.Read(key)
	}
	box, err := seal.Derive(key, "bff payment cursors", o.DecryptionKeys...)
	if err != nil {
		// HKDF fails only when asked for more than 255 hashes of key; a
		// 32-byte key never is.
		panic(err)
	}
	s.cursors = box
	if s.holdBox, err = seal.Derive(key, "bff step-up holds", o.DecryptionKeys...); err != nil {
		panic(err) // as above
	}
	return s
}

// Handles reports whether a call to t with method is payments' to serve: a
// POST under a money route or under the refresh route, and, with step-up
// on, a change of a merchant (payeechange.go).
func (s *Service) Handles(t proxy.Target, method string) bool {
	if s.changesPayee(t.Path, method) {
		return true
	}
	if method != http.MethodPost {
		return false
	}
	if s.underRefresh(t.Path) {
		return true
	}
	_, ok := s.money.Under(t.Path)
	return ok
}

// underRefresh reports a path under the refresh route: sent once, and
// under the credit guard when it is on.
func (s *Service) underRefresh(path string) bool {
	return strings.HasPrefix(path, RefreshPath) && (len(path) == len(RefreshPath) || path[len(RefreshPath)] == '/')
}

// Serve runs one call that Handles accepted. Like proxy.Forward, it writes
// to w only an answer (the upstream's, or a stored one replayed) and
// returns a failure, a *problem.Problem, for the caller to render.
func (s *Service) Serve(w http.ResponseWriter, r *http.Request, c proxy.Call, t proxy.Target) (proxy.Result, error) {
	res := proxy.Result{Route: t.Route}
	var p *problem.Problem
	switch route, _ := s.money.Under(t.Path); {
	case s.underRefresh(t.Path):
		res.UpstreamStatus, p = s.serveRefresh(w, r, c, t)
	case s.claims == nil:
		p = problem.New(problem.CodeLedgerUnavailable, "payments are not enabled: no ledger is configured")
	case s.changesPayee(t.Path, r.Method):
		var out labels
		out, p = s.changePayee(w, r, c, t)
		res.UpstreamStatus, res.Code = out.upstreamStatus, out.replayedCode
	default:
		var out labels
		out, p = s.pay(w, r, c, t, route)
		res.UpstreamStatus, res.Code = out.upstreamStatus, out.replayedCode
	}
	if p != nil {
		return res, p
	}
	return res, nil
}
