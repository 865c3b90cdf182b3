package payments

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/fintech-bff/bff/internal/ledger"
	"github.com/fintech-bff/bff/internal/problem"
	"github.com/fintech-bff/bff/internal/proxy"
	"github.com/fintech-bff/bff/internal/webhooks"
)

// Following a payment's status after its answer: each payment is polled
// by one instance at a time under a fenced lease, the wait doubling while
// its status stays, and a webhook pushes its next poll out
// (docs/payments.md, "Following a payment's status").

// Follow is how payments are followed.
type Follow struct {
	Interval    time.Duration // the wait after a change; 0: not followed
	MaxInterval time.Duration // the longest wait between two polls
	For         time.Duration // after this long since it was made, a payment is no longer followed
	Batch       int           // payments leased per look
}

// DefaultFollow are the defaults of payments.watch_*.
var DefaultFollow = Follow{Interval: 2 * time.Second, MaxInterval: 30 * time.Second, For: 24 * time.Hour, Batch: 64}

const (
	// pollTimeout bounds one poll: a slow upstream costs a wait, not the
	// lease of the whole batch.
	pollTimeout = 5 * time.Second
	// followLease is how long a leased batch is this instance's: its polls
	// end within pollTimeout (they run side by side, pollsAtOnce at a
	// time), and the lease outlives them with a margin. It is also how long
	// the payments of an instance that died wait for another.
	followLease = 10 * time.Second
	// pollsAtOnce bounds the polls an instance runs side by side.
	pollsAtOnce = 8
	// clockSkew is how far an instance's clock may be from the ledger
	// database's (docs/payments.md, "Webhooks").
	clockSkew = time.Minute
	// deliveriesKept is how long a webhook id is remembered, on the
	// database's clock, while its timestamp is checked on an instance's: a
	// message first taken with a timestamp a tolerance ahead of that
	// instance's clock stays fresh for two tolerances after it was taken,
	// and the instance that takes it and the one that sees it again may
	// each be clockSkew off the database, one ahead and one behind: 12
	// minutes. After it, a replay is refused as stale.
	deliveriesKept = 2*webhooks.DefaultTolerance + 2*clockSkew
)

// FollowLedger is what following needs of the ledger: the polls due
// (Watches), a poll's status stored (Watched), a pushed status stored once
// per delivery (Webhook), and old delivery ids forgotten.
type FollowLedger interface {
	Watches(ctx context.Context, limit int, lease time.Duration) ([]ledger.Watch, error)
	Watched(ctx context.Context, w ledger.Watch, o ledger.Observed) (ledger.StatusWrite, error)
	Webhook(ctx context.Context, deliveryID string, u ledger.StatusUpdate, later time.Duration) (ledger.Delivery, ledger.StatusWrite, error)
	PruneDeliveries(ctx context.Context, age time.Duration) error
}

var (
	_ FollowLedger = (*ledger.Postgres)(nil)
	_ FollowLedger = (*ledger.Memory)(nil)
)

// Follower follows payments' statuses after their answer.
type Follower struct {
	base
	ledger FollowLedger // the polls': the background's connections
	// pushed stores a webhook's status: a request's, on the request
	// path's connections, not queued behind the loops in the background.
	pushed FollowLedger
	follow Follow
	// instance names this process in the request ids of its polls.
	instance string
}

// newFollower returns the follower that polls through led (the
// background's) and stores pushed statuses through pushed (the request
// path's), following by follow; instance names this process in its polls.
func newFollower(b base, led, pushed FollowLedger, follow Follow, instance string) *Follower {
	return &Follower{base: b, ledger: led, pushed: pushed, follow: follow, instance: instance}
}

// tick is how often an instance looks for due polls: a quarter of the
// interval (a poll is then late by at most that), between 100 ms and 1 s.
func (f Follow) tick() time.Duration {
	return min(max(f.Interval/4, 100*time.Millisecond), time.Second)
}

// next is the wait after a poll of w that learned status (or failed).
func (f Follow) next(w ledger.Watch, status string, failed bool) time.Duration {
	if !failed && status != w.Status {
		return f.Interval
	}
	return min(max(2*w.Wait, f.Interval), f.MaxInterval)
}

// Run follows payments until ctx ends: every instance runs it.
// Without an interval it follows nothing, and still forgets old webhook
// ids (webhooks may be received all the same).
func (s *Follower) Run(ctx context.Context) {
	every := time.Second
	if s.follow.Interval > 0 {
		every = s.follow.tick()
	}
	t := time.NewTicker(every)
	defer t.Stop()
	prune := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if s.follow.Interval > 0 {
			s.followDue(ctx)
		}
		if time.Since(prune) > time.Minute {
			prune = time.Now()
			s.pruneDeliveries(ctx)
		}
	}
}

// pruneDeliveries forgets the webhook ids received more than
// deliveriesKept ago, on the database's clock.
func (s *Follower) pruneDeliveries(ctx context.Context) {
	lctx, cancel := context.WithTimeout(ctx, ledgerTimeout)
	defer cancel()
	if err := s.ledger.PruneDeliveries(lctx, deliveriesKept); err != nil {
		s.log.Warn("old webhook ids could not be pruned", slog.String("error", err.Error()))
	}
}

// followDue leases the due polls and runs them, pollsAtOnce at a time,
// within the lease.
func (s *Follower) followDue(ctx context.Context) {
	lctx, cancel := context.WithTimeout(ctx, ledgerTimeout)
	ws, err := s.ledger.Watches(lctx, s.follow.Batch, followLease)
	cancel()
	if err != nil {
		s.log.Warn("the follower could not read the ledger", slog.String("error", err.Error()))
		return
	}
	if len(ws) == 0 {
		return
	}
	bctx, cancel := context.WithTimeout(ctx, followLease-time.Second)
	defer cancel()
	sem := make(chan struct{}, pollsAtOnce)
	var wg sync.WaitGroup
	for _, w := range ws {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			s.poll(bctx, w)
		})
	}
	wg.Wait()
}

// polled is the part of the upstream's payment a poll reads.
type polled struct {
	Status    string    `json:"status"`
	UpdatedAt time.Time `json:"updatedAt"`
}

// poll asks the upstream for w's payment once and stores what it learned.
func (s *Follower) poll(ctx context.Context, w ledger.Watch) {
	pctx, cancel := context.WithTimeout(ctx, pollTimeout)
	// The poll acts for the record's user, under the request id that
	// claimed it, so the upstream's log ties it to the payment, and names
	// the instance that polled.
	id := w.RequestID + "-follow-" + strconv.FormatInt(w.ID, 10)
	if s.instance != "" {
		id += "-" + s.instance
	}
	rep, p := s.up.Exchange(pctx, proxy.Exchange{
		Call:   proxy.Call{UserID: w.UserID, RequestID: id},
		Target: proxy.Target{Path: creationPath + "/" + url.PathEscape(w.PaymentID), Route: creationPath},
		Method: http.MethodGet, Header: http.Header{"Accept": {"application/json"}},
	})
	cancel()
	var o ledger.Observed
	var got polled
	switch {
	case p == nil && rep.Status == http.StatusOK && json.Unmarshal(rep.Body, &got) == nil && got.Status != "":
		// A final status ends the following once the ledger stores it (a
		// final status is never replaced: docs/payments.md): not when it is
		// not believed (dated ahead) or an older one than the stored status.
		// The API documents no updatedAt for a payment: without one, the
		// status is dated when the ledger stores it (Observed.Undated).
		o.Status, o.At, o.Undated = got.Status, got.UpdatedAt, got.UpdatedAt.IsZero()
		o.Wait = s.follow.next(w, got.Status, false)
		if got.Status != w.Status {
			s.observe.Followed(FollowChanged)
		} else {
			s.observe.Followed(FollowUnchanged)
		}
	case p == nil && rep.Status == http.StatusNotFound:
		// The upstream does not know the payment (deleted, or another
		// organization's): nothing more will come of polling it.
		o.Stop = true
		s.observe.Followed(FollowNotFound)
	default:
		o.Wait = s.follow.next(w, "", true)
		s.observe.Followed(FollowFailed)
	}
	if time.Since(w.CreatedAt) > s.follow.For {
		o.Stop = true
	}
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ledgerTimeout)
	wr, err := s.ledger.Watched(lctx, w, o)
	cancel()
	switch {
	case err != nil:
		s.log.Warn("the follower could not store a payment's status", slog.String("error", err.Error()))
	case wr == ledger.StatusFenced:
		// The lease ran out and another instance polls it now.
		s.observe.Followed(FollowLeaseLost)
	default:
		s.ignored(wr, o.Status, o.At, slog.String("requestId", id), slog.String("paymentId", w.PaymentID))
	}
}

// ignored logs a status the ledger would not store for a reason worth an
// operator's look: one after the payment's final status (final is final:
// the upstream contradicted itself, or a slow reader came late), or one
// dated ahead of this server's clock (a clock is wrong). ids name the
// payment and the request or delivery, never a token or secret.
func (s *Follower) ignored(wr ledger.StatusWrite, status string, at time.Time, ids ...any) {
	var msg string
	switch wr {
	case ledger.StatusAfterFinal:
		msg = "a payment's status after its final one was ignored: final is final"
	case ledger.StatusFuture:
		msg = "a payment's status dated ahead of this server's clock was not believed"
	default:
		return
	}
	s.log.Warn(msg, append(ids, slog.String("status", status), slog.Time("updatedAt", at))...)
}

// StatusUpdate is a payment status the upstream pushed by webhook.
type StatusUpdate = ledger.StatusUpdate

// Delivery is what a pushed status did: ledger.DeliveryApplied, DeliveryReplayed or
// DeliveryUnmatched.
type Delivery = ledger.Delivery

// StatusPushed stores a payment status the upstream pushed by webhook,
// once per delivery id (the caller verified its signature): a final status
// stored ends the following, another pushes the next poll out to
// MaxInterval. One after a final status, or dated ahead, is logged and not
// stored.
func (s *Follower) StatusPushed(ctx context.Context, deliveryID string, u StatusUpdate) (Delivery, error) {
	lctx, cancel := context.WithTimeout(ctx, ledgerTimeout)
	defer cancel()
	d, wr, err := s.pushed.Webhook(lctx, deliveryID, u, s.follow.MaxInterval)
	if err != nil {
		return 0, problem.Wrap(problem.CodeLedgerUnavailable, "the webhook cannot be stored right now; send it again", err)
	}
	switch d {
	case ledger.DeliveryApplied:
		s.ignored(wr, u.Status, u.At, slog.String("webhookId", deliveryID), slog.String("paymentId", u.PaymentID))
		s.observe.Followed(FollowWebhookApplied)
	case ledger.DeliveryReplayed:
		s.observe.Followed(FollowWebhookReplayed)
	case ledger.DeliveryUnmatched:
		s.observe.Followed(FollowWebhookUnmatched)
	}
	return d, nil
}
