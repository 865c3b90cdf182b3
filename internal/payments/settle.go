package payments

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fintech-bff/bff/internal/ledger"
	"github.com/fintech-bff/bff/internal/problem"
	"github.com/fintech-bff/bff/internal/proxy"
)

// Settling learns from the upstream whether a payment whose answer was
// lost exists. The upstream takes no idempotency key, so the only evidence
// is its payment list, read against what the owner recorded with its send
// mark (ledger.Send):
//
//   - before the send, the owner read the newest page of the user's
//     payments: the ones with the same content listed there existed
//     before the send and are never this request's (SeenBefore, bounded
//     by SeenCut when the page was not the whole list);
//   - from the upstream's Date header on that read, against the owner's
//     own clock, the latest upstream time at which this request could
//     still have made a payment (WindowEnd), and the earliest a payment
//     made after the read can show (SeenFrom);
//   - the ledger: a payment any other record of the user owns, on any
//     route, is never this request's; another request with the same
//     content that may still be making its payment makes a match
//     ambiguous.
//
// A payment is this request's only when exactly one listed payment passes
// all of that. docs/payments.md gives the argument and its one assumption.
const (
	// settlePath is the creation route settling understands; the
	// open-banking init is not settled (its payment may exist before it).
	settlePath = "/v2/payments"
	// listLimit is the page size of every payment list read.
	listLimit = 100
	// settlePages bounds the list pages one settling reads.
	settlePages = 5
	// settleTimeout bounds one settling.
	settleTimeout = 10 * time.Second
	// dateSlack: the upstream's Date is to the second, and stamped a moment
	// after the list it goes with was read.
	dateSlack = 2 * time.Second
)

// verdict is what settling concluded.
type verdict int

const (
	unsure verdict = iota // the evidence proves nothing: the outcome stays unknown
	none                  // no payment this request could have made exists
	made                  // exactly one payment is this request's
)

// content is what settling compares of a payment request.
type content struct {
	Info        map[string]any `json:"paymentInformation"`
	RedirectURL string         `json:"redirectUrl,omitempty"`
}

// paymentContent is what settling compares of a money request, as JSON:
// its paymentInformation and redirectUrl; nil when it has no
// paymentInformation (it makes no new payment settling could mistake).
func paymentContent(body []byte) []byte {
	var c content
	if json.Unmarshal(body, &c) != nil || len(c.Info) == 0 {
		return nil
	}
	b, _ := json.Marshal(c)
	return b
}

func (c content) matches(p listedPayment) bool {
	return sameInformation(c.Info, p.Info) && (c.RedirectURL == "" || c.RedirectURL == p.RedirectURL)
}

type listedPayment struct {
	ID          string         `json:"id"`
	PayURL      string         `json:"payUrl"`
	RedirectURL string         `json:"redirectUrl"`
	CreatedAt   time.Time      `json:"createdAt"`
	Info        map[string]any `json:"paymentInformation"`
}

// snapshot reads the newest page of the user's payments just before a
// send, and returns the evidence to record with the mark. It is the zero
// Send (the send will not be settled) when the list cannot be read.
func (s *Service) snapshot(ctx context.Context, c proxy.Call, raw []byte) ledger.Send {
	var ct content
	_ = json.Unmarshal(raw, &ct)
	start := time.Now()
	items, next, date, err := s.listPage(ctx, c, "")
	if err != nil {
		s.observe.MoneyRequest("snapshot_failed")
		s.log.Warn("a payment is sent without a snapshot of the user's payments: should its answer be lost, it stays unknown",
			slog.String("requestId", c.RequestID), slog.String("error", problem.CauseText(err)))
		return ledger.Send{}
	}
	ev := ledger.Send{Snapshot: true}
	for _, p := range items {
		if p.ID != "" && ct.matches(p) {
			ev.SeenBefore = append(ev.SeenBefore, p.ID)
		}
	}
	if next != "" {
		// Only the newest page was read: the older payments are excluded
		// by time instead, so every item must tell its time.
		for _, p := range items {
			if p.CreatedAt.IsZero() {
				return ledger.Send{}
			}
			if ev.SeenCut.IsZero() || p.CreatedAt.Before(ev.SeenCut) {
				ev.SeenCut = p.CreatedAt
			}
		}
	}
	if !date.IsZero() {
		ev.SeenFrom = date.Add(-dateSlack)
		if dl, ok := ctx.Deadline(); ok {
			// The upstream's clock reads date somewhere in [date, date+1s)
			// at a local moment after start, so at the local deadline,
			// after which this request can no longer reach the upstream,
			// it reads less than date + 1s + (deadline - start). The
			// upstream then has ownerMargin to make the payment.
			ev.WindowEnd = date.Add(time.Second + dl.Sub(start) + ownerMargin)
		}
	}
	return ev
}

// candidate reports whether listed payment p could be the one the send
// recorded in ev made.
func candidate(ev ledger.Send, ct content, p listedPayment) bool {
	if p.ID == "" || !ct.matches(p) || slices.Contains(ev.SeenBefore, p.ID) {
		return false
	}
	if p.CreatedAt.IsZero() {
		// No time to judge it by: only a snapshot of the whole list can
		// say it was not there before.
		return ev.SeenCut.IsZero()
	}
	switch {
	case !ev.SeenCut.IsZero() && !p.CreatedAt.After(ev.SeenCut):
		return false // older than what the snapshot read: it existed before
	case !ev.SeenFrom.IsZero() && p.CreatedAt.Before(ev.SeenFrom):
		return false // created before the snapshot was read
	case !ev.WindowEnd.IsZero() && p.CreatedAt.After(ev.WindowEnd):
		return false // created after this request could have reached the upstream
	}
	return true
}

// settling is what settle needs of a record: its id, its content and
// match, when its claim was made, and the evidence its send mark recorded.
type settling struct {
	id      int64
	match   []byte
	content []byte
	since   time.Time
	ev      ledger.Send
}

func settlingOf(rec *ledger.Record) settling {
	return settling{id: rec.ID, match: rec.Match, content: rec.Content, since: rec.ClaimedAt, ev: rec.Send}
}

// settle looks for the payment the send of record r may have made, for
// user c.UserID.
func (s *Service) settle(ctx context.Context, c proxy.Call, r settling) (ledger.Outcome, verdict) {
	ev := r.ev
	if r.content == nil || !ev.Snapshot || ev.WindowEnd.IsZero() {
		// No snapshot, or no window (the upstream sent no Date): a payment
		// made through another channel at any later time could pass.
		return ledger.Outcome{}, unsure
	}
	var ct content
	if json.Unmarshal(r.content, &ct) != nil {
		return ledger.Outcome{}, unsure
	}
	ctx, cancel := context.WithTimeout(ctx, settleTimeout)
	defer cancel()
	lower := ev.SeenFrom
	if ev.SeenCut.After(lower) {
		lower = ev.SeenCut
	}
	var found []listedPayment
	complete := false
	next := ""
	for page := 0; page < settlePages && !complete; page++ {
		items, cursor, _, err := s.listPage(ctx, c, next)
		if err != nil {
			s.log.Warn("settling a payment: the payment list could not be read", slog.String("requestId", c.RequestID), slog.String("error", problem.CauseText(err)))
			return ledger.Outcome{}, unsure
		}
		for _, p := range items {
			if !lower.IsZero() && !p.CreatedAt.IsZero() && p.CreatedAt.Before(lower) {
				complete = true // newest first: the rest are older still
				continue
			}
			if candidate(ev, ct, p) {
				found = append(found, p)
			}
		}
		complete = complete || cursor == ""
		next = cursor
	}
	if !complete {
		return ledger.Outcome{}, unsure
	}
	ids := make([]string, len(found))
	for i, p := range found {
		ids[i] = p.ID
	}
	lctx, lcancel := context.WithTimeout(ctx, ledgerTimeout)
	n, err := s.ledger.Neighbours(lctx, c.UserID, r.id, r.match, r.since, ids)
	lcancel()
	if err != nil {
		return ledger.Outcome{}, unsure
	}
	var mine []listedPayment
	for _, p := range found {
		if !n.Taken[p.ID] {
			mine = append(mine, p)
		}
	}
	switch {
	case len(mine) == 0:
		return ledger.Outcome{}, none
	case len(mine) > 1:
		s.log.Warn("settling a payment: several payments match; leaving the outcome unknown", slog.String("requestId", c.RequestID), slog.Int("matches", len(mine)))
		return ledger.Outcome{}, unsure
	case n.Open || matchedByAnother(mine[0], n.Contents):
		return ledger.Outcome{}, unsure // another open request may have made that payment
	}
	p := mine[0]
	reply, _ := json.Marshal(struct {
		ID     string `json:"id"`
		PayURL string `json:"payUrl,omitempty"`
	}{p.ID, p.PayURL})
	return ledger.Outcome{
		Ending: ledger.EndSettled, PaymentID: p.ID,
		Response: &ledger.Response{Status: http.StatusCreated, Header: http.Header{"Content-Type": {"application/json"}}, Body: reply},
	}, made
}

// matchedByAnother reports whether payment p has the content of one of the
// other open requests: then it could be that request's.
func matchedByAnother(p listedPayment, others [][]byte) bool {
	for _, raw := range others {
		var ct content
		if json.Unmarshal(raw, &ct) != nil || ct.matches(p) {
			return true
		}
	}
	return false
}

// listPage reads one page of the user's payments, newest first, through
// the upstream exchange (the user's token; a GET, so the 401 re-mint and
// the retries apply), and the upstream's Date.
func (s *Service) listPage(ctx context.Context, c proxy.Call, cursor string) ([]listedPayment, string, time.Time, error) {
	q := url.Values{"limit": {strconv.Itoa(listLimit)}, "sort": {"-1"}}
	if cursor != "" {
		q.Set("nextPage", cursor)
	}
	rep, p := s.up.Exchange(ctx, proxy.Exchange{
		Call: proxy.Call{UserID: c.UserID, RequestID: c.RequestID}, Target: proxy.Target{Path: settlePath, Route: settlePath},
		Method: http.MethodGet, RawQuery: q.Encode(), Header: http.Header{"Accept": {"application/json"}},
	})
	if p != nil {
		return nil, "", time.Time{}, p
	}
	if rep.Status != http.StatusOK {
		return nil, "", time.Time{}, problem.Newf(problem.CodeUpstreamError, "the payment list answered %d", rep.Status)
	}
	var page struct {
		Items    []listedPayment `json:"items"`
		NextPage any             `json:"nextPage"`
	}
	if err := json.Unmarshal(rep.Body, &page); err != nil {
		return nil, "", time.Time{}, problem.Wrap(problem.CodeUpstreamError, "the payment list is not JSON", err)
	}
	next := ""
	switch v := page.NextPage.(type) {
	case string:
		next = v
	case float64:
		next = strconv.FormatFloat(v, 'f', -1, 64)
	}
	return page.Items, next, rep.Date, nil
}

// matchKey hashes what settling compares of a payment request: its
// paymentInformation and redirectUrl, normalised as sameInformation
// compares them (numbers by value, IBANs without spaces or case). Two
// requests with the same key are the ones settling could confuse. nil when
// the body is not a JSON object.
func matchKey(body []byte) []byte {
	var v content
	if json.Unmarshal(body, &v) != nil {
		return nil
	}
	b, _ := json.Marshal([]any{normalizeInfo(v.Info), v.RedirectURL}) // maps marshal with sorted keys
	sum := sha256.Sum256(b)
	return sum[:]
}

func normalizeInfo(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		switch x := v.(type) {
		case map[string]any:
			out[k] = normalizeInfo(x)
		case string:
			if strings.EqualFold(k, "iban") {
				out[k] = normIBAN(x)
			} else if f, ok := number(x); ok {
				out[k] = f
			} else {
				out[k] = x
			}
		default:
			out[k] = v
		}
	}
	return out
}

// sameInformation reports whether every field the client sent in
// paymentInformation is in the listed payment with the same value; numbers
// compare by value whether sent as a number or a string, IBANs without
// spaces or case.
func sameInformation(sent, listed map[string]any) bool {
	if listed == nil {
		return false
	}
	for k, v := range sent {
		if !sameValue(strings.EqualFold(k, "iban"), v, listed[k]) {
			return false
		}
	}
	return true
}

func sameValue(iban bool, a, b any) bool {
	switch av := a.(type) {
	case map[string]any:
		bv, ok := b.(map[string]any)
		return ok && sameInformation(av, bv)
	case float64, string:
		if af, ok := number(a); ok && !iban {
			bf, ok := number(b)
			return ok && af == bf
		}
		as, _ := a.(string)
		bs, ok := b.(string)
		if iban {
			return ok && normIBAN(as) == normIBAN(bs)
		}
		return ok && as == bs
	case nil:
		return b == nil
	default:
		ab, _ := json.Marshal(a)
		bb, _ := json.Marshal(b)
		return string(ab) == string(bb)
	}
}

func number(v any) (float64, bool) {
	switch n := v.(type) {
	case float64:
		return n, true
	case string:
		f, err := strconv.ParseFloat(strings.TrimSpace(n), 64)
		return f, err == nil
	}
	return 0, false
}

func normIBAN(s string) string { return strings.ToUpper(strings.ReplaceAll(s, " ", "")) }
