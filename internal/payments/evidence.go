package payments

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/fintech-bff/bff/internal/ledger"
	"github.com/fintech-bff/bff/internal/money"
	"github.com/fintech-bff/bff/internal/mutant"
	"github.com/fintech-bff/bff/internal/problem"
	"github.com/fintech-bff/bff/internal/proxy"
)

// Evidence gathering, shared by the money path and the recoverer: the
// snapshot the owner records with its send mark, and settling a request
// whose answer was lost (or that the upstream refused after it may have
// acted): the upstream's payment list now and the user's other money
// requests in the ledger, handed to Conclude (conclude.go), where the rules
// live (docs/payments.md, "Settling"). Storing what it concluded is here
// too, one method (store) for every caller and every site.

// EvidenceLedger is what evidence gathering needs of the ledger: the
// user's other requests (Others), and a conclusion stored on an unknown
// record (Settle when made, GiveBack when not made).
type EvidenceLedger interface {
	Others(ctx context.Context, userID string, except int64, since time.Time, ids []string) ([]ledger.OtherRequest, error)
	Settle(ctx context.Context, id int64, o ledger.Outcome) (bool, error)
	GiveBack(ctx context.Context, id int64) (bool, error)
}

var (
	_ EvidenceLedger = (*ledger.Postgres)(nil)
	_ EvidenceLedger = (*ledger.Memory)(nil)
)

const (
	// listLimit is the page size of every payment list read.
	listLimit = 100
	// listPages bounds the pages a snapshot or a settling reads: a user
	// with more payments than that is never concluded "not made".
	listPages = 5
	// settleTimeout bounds one settling.
	settleTimeout = 10 * time.Second
	// dateSlack: the upstream's Date is to the second, and stamped a moment
	// after the list it goes with was read.
	dateSlack = 2 * time.Second
)

// evidence gathers and concludes.
type evidence struct {
	base
	ledger EvidenceLedger
	// listLag is how long the upstream's payment list may take to show a
	// payment it made (payments.list_lag).
	listLag time.Duration
}

// newEvidence returns the evidence gathering that reads led, for a list
// that lags its creations by listLag.
func newEvidence(b base, led EvidenceLedger, listLag time.Duration) *evidence {
	return &evidence{base: b, ledger: led, listLag: listLag}
}

// snapshot reads the user's payments just before a send, and returns the
// evidence to record with the mark. It is the zero SendEvidence (the send
// will never be settled) when the list cannot be read.
func (s *evidence) snapshot(ctx context.Context, c proxy.Call, want Content) ledger.SendEvidence {
	start := time.Now()
	l, err := s.listing(ctx, c)
	if err != nil {
		s.observe.MoneyRequest(MoneySnapshotFailed)
		s.log.Warn("a payment is sent without a snapshot of the user's payments: should its answer be lost, it stays unknown",
			slog.String("requestId", c.RequestID), slog.String("error", problem.CauseText(err)))
		return ledger.SendEvidence{}
	}
	ev := ledger.SendEvidence{Snapshot: true}
	for _, p := range l.Payments {
		if p.ID != "" && want.Similar(p) {
			ev.SeenBefore = append(ev.SeenBefore, p.ID)
		}
	}
	if !l.Whole {
		// The oldest payments were not read: they are excluded by time
		// instead, so every item read must tell its time.
		for _, p := range l.Payments {
			if p.CreatedAt.IsZero() {
				return ledger.SendEvidence{}
			}
			if ev.SeenCut.IsZero() || p.CreatedAt.Before(ev.SeenCut) {
				ev.SeenCut = p.CreatedAt
			}
		}
	}
	if !l.Date.IsZero() {
		ev.SeenFrom = l.Date.Add(-dateSlack)
		if dl, ok := ctx.Deadline(); ok {
			// The upstream's clock reads Date somewhere in [Date, Date+1s)
			// at a local moment after start, so at the local deadline,
			// after which this request can no longer reach the upstream,
			// it reads less than Date + 1s + (deadline - start). The
			// upstream then has ownerMargin to make the payment.
			ev.WindowEnd = l.Date.Add(time.Second + dl.Sub(start) + ownerMargin)
		}
	}
	return ev
}

// subject is what settling needs of a record: its id, what it asked to
// create, when it was claimed (the ledger's clock), and the evidence its
// send mark recorded.
type subject struct {
	id        int64
	content   []byte
	claimedAt time.Time
	snapshot  ledger.SendEvidence
	// answered: the upstream answered its send, so it no longer acts on it.
	answered bool
	// expired: its deadline has passed (the ledger's clock), after which no
	// send of it can reach the upstream.
	expired bool
}

func subjectOf(rec *ledger.Record) subject {
	return subject{id: rec.ID, content: rec.Content, claimedAt: rec.ClaimedAt, snapshot: rec.Send, expired: rec.Expired}
}

// settle gathers the evidence about record r, acting for user c.UserID,
// and concludes.
func (s *evidence) settle(ctx context.Context, c proxy.Call, r subject) Result {
	want, ok := ParseContent(r.content)
	if !ok || !r.snapshot.Snapshot {
		return unknownBecause("the request was sent without a snapshot, or creates no payment")
	}
	ctx, cancel := context.WithTimeout(ctx, settleTimeout)
	defer cancel()
	lag := s.listLag
	if mutant.Is(mutant.ListLagIgnored) {
		lag = 0
	}
	if r.answered && lag > 0 {
		// An upstream whose list lags its creations: a payment the answered
		// send made shows only after the lag, so the list is read after it.
		t := time.NewTimer(lag)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return unknownBecause("no list could be read after the upstream's list lag")
		}
	}
	// The whole list (at most listPages): "not made" needs it, whatever
	// the payments' times say.
	l, err := s.listing(ctx, c)
	if err != nil {
		s.log.Warn("settling a payment: the payment list could not be read", slog.String("requestId", c.RequestID), slog.String("error", problem.CauseText(err)))
		return unknownBecause("the payment list could not be read")
	}
	var ids []string
	for _, p := range l.Payments {
		if want.Equal(p) {
			ids = append(ids, p.ID)
		}
	}
	// The others are the requests that could still act after this one's
	// claim: a payment they made before it is in the snapshot, so it is
	// never fresh. A lagging list shows a payment only lag after it was
	// made, so the snapshot may miss one made up to lag before it: the
	// requests that could act then are others too.
	since := r.claimedAt
	if lag > 0 && !mutant.Is(mutant.OthersSinceClaim) {
		since = since.Add(-lag - dateSlack)
	}
	lctx, lcancel := context.WithTimeout(ctx, ledgerTimeout)
	others, err := s.ledger.Others(lctx, c.UserID, r.id, since, ids)
	lcancel()
	if err != nil {
		return unknownBecause("the ledger could not be read")
	}
	res := Conclude(Evidence{Request: want, Snapshot: r.snapshot, Listing: l, Quiet: quiet(r, l, lag), Others: others})
	if res.Conclusion == Unknown {
		s.log.Info("settling a payment: the outcome stays unknown", slog.String("requestId", c.RequestID), slog.String("reason", res.Reason))
	}
	return res
}

// quiet reports whether no send of r can still be acting at the upstream,
// nor be missing from a list read now: it was answered, or it is past its
// deadline and, when the upstream's clock and r's window are known, that
// clock is past the window (and the list's lag after it) too.
func quiet(r subject, l Listing, lag time.Duration) bool {
	switch {
	case r.answered:
		return true // and settle read the list lag after the answer
	case !r.expired:
		return false
	case lag > 0 && (l.Date.IsZero() || r.snapshot.WindowEnd.IsZero()):
		return false // a lagging list is read as current only by the upstream's clock
	}
	return l.Date.IsZero() || r.snapshot.WindowEnd.IsZero() || l.Date.After(r.snapshot.WindowEnd.Add(lag))
}

// settledAnswer is the answer settling stores for a payment it proved
// made, in the shape of the endpoint's own answer as far as the list tells
// it: a creation's 201 {id, payUrl}, an open-banking init's 200 {paymentId,
// providerId, status, authorizationUrl}.
func settledAnswer(path string, p Listed) ledger.Outcome {
	status, reply := http.StatusCreated, []byte(nil)
	if path == initPath {
		status = http.StatusOK
		reply, _ = json.Marshal(struct {
			PaymentID        string `json:"paymentId"`
			ProviderID       string `json:"providerId,omitempty"`
			Status           string `json:"status,omitempty"`
			AuthorizationURL string `json:"authorizationUrl,omitempty"`
		}{p.ID, p.ProviderID, p.Status, p.PayURL})
	} else {
		reply, _ = json.Marshal(struct {
			ID     string `json:"id"`
			PayURL string `json:"payUrl,omitempty"`
		}{p.ID, p.PayURL})
	}
	return ledger.Outcome{
		Ending: ledger.EndSettled, PaymentID: p.ID,
		Response: &ledger.Response{Status: status, Header: http.Header{"Content-Type": {"application/json"}}, Body: reply},
	}
}

// listing reads the user's payments, newest first, page by page to the
// end of the list, at most listPages pages.
func (s *evidence) listing(ctx context.Context, c proxy.Call) (Listing, error) {
	var l Listing
	next := ""
	for page := 0; page < listPages; page++ {
		items, cursor, date, err := s.listPage(ctx, c, next)
		if err != nil {
			return Listing{}, err
		}
		if page == 0 {
			l.Date = date
		}
		l.Payments = append(l.Payments, items...)
		if cursor == "" {
			l.Whole = true
			return l, nil
		}
		next = cursor
	}
	return l, nil
}

// listPage reads one page of the user's payments, newest first, through
// the upstream exchange (the user's token; a GET, so the 401 re-mint and
// the retries apply), and the upstream's Date.
func (s *evidence) listPage(ctx context.Context, c proxy.Call, cursor string) ([]Listed, string, time.Time, error) {
	q := url.Values{"limit": {strconv.Itoa(listLimit)}, "sort": {"-1"}}
	if cursor != "" {
		q.Set("nextPage", cursor)
	}
	rep, p := s.up.Exchange(ctx, proxy.Exchange{
		Call: proxy.Call{UserID: c.UserID, RequestID: c.RequestID}, Target: proxy.Target{Path: creationPath, Route: creationPath},
		Method: http.MethodGet, RawQuery: q.Encode(), Header: http.Header{"Accept": {"application/json"}},
	})
	if p != nil {
		return nil, "", time.Time{}, p
	}
	if rep.Status != http.StatusOK {
		return nil, "", time.Time{}, problem.Newf(problem.CodeUpstreamError, "the payment list answered %d", rep.Status)
	}
	var page struct {
		Items    []Listed `json:"items"`
		NextPage any      `json:"nextPage"`
	}
	d := json.NewDecoder(bytes.NewReader(rep.Body))
	d.UseNumber() // a numeric cursor is passed on as written
	if err := d.Decode(&page); err != nil {
		return nil, "", time.Time{}, problem.Wrap(problem.CodeUpstreamError, "the payment list is not JSON", err)
	}
	next := ""
	switch v := page.NextPage.(type) {
	case string:
		next = v
	case json.Number:
		next = v.String()
	}
	for i := range page.Items {
		page.Items[i].Content = money.ReadSeen(page.Items[i].Info)
	}
	return page.Items, next, rep.Date, nil
}

// site is where a conclusion is stored: where its request stands. An
// unknown record (a repeat's, the recoverer's) is one (unknownRecord); the
// claim its owner still holds is another (owner.go).
type site interface {
	// made stores the settled answer o of a payment proved made.
	made(ctx context.Context, o ledger.Outcome) (bool, error)
	// notMade gives the key back: the upstream proved to have made nothing.
	notMade(ctx context.Context) (bool, error)
}

// store stores what settling concluded of a request sent to path, whose
// last upstream status was status, at: its settled answer when made, its
// key given back when not made. It is the one way a conclusion is stored.
// applied is false when another request or the recoverer ended it first,
// and for Unknown, which stores nothing.
func (s *evidence) store(ctx context.Context, at site, path string, status int, res Result) (applied bool, err error) {
	switch res.Conclusion {
	case Made:
		o := settledAnswer(path, res.Payment)
		o.UpstreamStatus = status
		return at.made(ctx, o)
	case NotMade:
		return at.notMade(ctx)
	}
	return false, nil
}

// unknownRecord is an unknown record as the site of its conclusion: made
// is Settle, not made GiveBack, each under ledgerTimeout.
type unknownRecord struct {
	ledger EvidenceLedger
	id     int64
}

// unknown is the unknown record rec as the site of its conclusion.
func (s *evidence) unknown(rec *ledger.Record) unknownRecord {
	return unknownRecord{ledger: s.ledger, id: rec.ID}
}

func (u unknownRecord) made(ctx context.Context, o ledger.Outcome) (bool, error) {
	return withLedger(ctx, func(ctx context.Context) (bool, error) { return u.ledger.Settle(ctx, u.id, o) })
}

func (u unknownRecord) notMade(ctx context.Context) (bool, error) {
	return withLedger(ctx, func(ctx context.Context) (bool, error) { return u.ledger.GiveBack(ctx, u.id) })
}

// recordPath is the endpoint a settleable record was sent to, from its
// money route: the open-banking init under /v2/pay, else the creation.
func recordPath(rec *ledger.Record) string {
	if strings.HasPrefix(initPath, rec.Route) && !strings.HasPrefix(creationPath, rec.Route) {
		return initPath
	}
	return creationPath
}
