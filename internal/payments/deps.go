package payments

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/fintech-bff/bff/internal/ledger"
	"github.com/fintech-bff/bff/internal/limits"
	"github.com/fintech-bff/bff/internal/problem"
	"github.com/fintech-bff/bff/internal/proxy"
)

// What every part of payments shares: the upstream, the observer and the
// log, the paths the upstream defines, and the bounds on each store call.

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

// Observer receives what payments did. Implementations must be cheap and
// safe for concurrent use.
type Observer interface {
	// MoneyRequest reports how a money-moving request was answered, or
	// how the recoverer ended one (labels.go names every result).
	MoneyRequest(result MoneyResult)
	// Followed reports a poll of a followed payment, or a webhook stored
	// (those the edge answers alone are the edge's Observer's).
	Followed(result FollowResult)
	// Refused reports a request a limit refused before it reached the
	// upstream: limit is "refresh" (the credit guard).
	Refused(limit limits.Kind)
}

type nopObserver struct{}

func (nopObserver) MoneyRequest(MoneyResult) {}
func (nopObserver) Refused(limits.Kind)      {}
func (nopObserver) Followed(FollowResult)    {}

// base is what every part holds: the upstream, the observer and the log,
// and how many payments the ledger has refused lately.
type base struct {
	up      Upstream
	log     *slog.Logger
	observe Observer
	refused *refusals
}

// ledgerFailed is 503 LEDGER_UNAVAILABLE: nothing was sent upstream.
func (b base) ledgerFailed(requestID string, err error) *problem.Problem {
	b.observe.MoneyRequest(MoneyLedgerUnavailable)
	b.log.Error("the payments ledger failed; the payment was not sent", slog.String("requestId", requestID), slog.String("error", err.Error()))
	detail := "payments cannot be recorded right now; nothing was sent, retry with the same Idempotency-Key"
	if errors.Is(err, ledger.ErrUnreadable) {
		detail = "this payment's stored answer cannot be read right now; nothing was sent again"
	}
	return b.shed(detail, err)
}

// shed is 503 LEDGER_UNAVAILABLE with detail, counted among the refusals,
// with a Retry-After that spreads the retries (refusals).
func (b base) shed(detail string, err error) *problem.Problem {
	p := problem.Wrap(problem.CodeLedgerUnavailable, detail, err)
	p.RetryAfter = strconv.Itoa(b.refused.retryAfter())
	return p
}

// refusals counts the payments refused for the ledger in the current and
// the last second, to spread their clients' retries: while the ledger
// sheds load, every client told "retry in a second" comes back together,
// and the retries alone can keep a recovering database busy (the load that
// once kept a BFF refusing payments long after its database answered
// again). Retry-After is 1 s when few are refused, and up to maxRetryAfter
// s, drawn at random, as more are.
type refusals struct {
	mu          sync.Mutex
	second      int64
	now, before int
}

// maxRetryAfter bounds the Retry-After of a refused payment, in seconds.
const maxRetryAfter = 10

// refusalsPerSecondOfWait is how many refusals a second add a second to
// the spread of retries.
const refusalsPerSecondOfWait = 25

// retryAfter counts a refusal and returns the Retry-After for it.
func (r *refusals) retryAfter() int {
	if r == nil {
		return 1
	}
	r.mu.Lock()
	sec := time.Now().Unix()
	switch {
	case sec == r.second+1:
		r.before, r.now = r.now, 0
	case sec != r.second:
		r.before, r.now = 0, 0
	}
	r.second = sec
	r.now++
	recent := max(r.now, r.before)
	r.mu.Unlock()
	spread := min(maxRetryAfter, 1+recent/refusalsPerSecondOfWait)
	return 1 + rand.IntN(spread)
}

// The endpoints of the upstream that payments reads or sends to.
const (
	// creationPath and initPath are the money endpoints the upstream
	// defines: a payment's creation (and, GET, the user's payments and
	// each payment), and the open-banking init (a creation when it
	// carries paymentInformation and no paymentId).
	creationPath = "/v2/payments"
	initPath     = "/v2/pay/open-banking-init"
	// merchantsPath is the upstream's merchants: a merchant payment's
	// money goes to the account its merchant has when the upstream acts.
	merchantsPath = "/v2/merchants"
	// RefreshPath is the on-demand refresh, the route that costs credits.
	// The guard holds for every path under it.
	RefreshPath = "/chat/chat/connections/refresh"
)

const (
	// ownerMargin is how long after its upstream deadline the owner of a
	// claim may still be storing its outcome. A claim's deadline is the
	// upstream timeout plus this: past it, the owner can no longer reach
	// the upstream, so another request (or the recoverer) may end the
	// claim.
	ownerMargin = 5 * time.Second
	// ledgerTimeout bounds each ledger call: a database that does not
	// answer fails the payment with a clear 503 before anything is sent.
	ledgerTimeout = 3 * time.Second
	// storeTimeout bounds the credit guard's calls to Redis the same way.
	storeTimeout = 3 * time.Second
)

// withLedger runs one ledger call under ledgerTimeout.
func withLedger[T any](ctx context.Context, call func(context.Context) (T, error)) (T, error) {
	lctx, cancel := context.WithTimeout(ctx, ledgerTimeout)
	defer cancel()
	return call(lctx)
}

// noLedger is the answer of every part of payments when no ledger is
// configured.
func noLedger() *problem.Problem {
	return problem.New(problem.CodeLedgerUnavailable, "payments are not enabled: no ledger is configured")
}
