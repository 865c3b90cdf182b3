package proxy

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/fintech-bff/bff/internal/ledger"
	"github.com/fintech-bff/bff/internal/problem"
)

// Settling learns from the upstream whether a payment whose answer was lost
// exists. The upstream takes no idempotency key of its own, so the only
// evidence is its payment list: a payment created around the claim's time
// with the same paymentInformation. Settling is conservative: it settles
// only when exactly one such payment exists, no other record of the user
// owns it, and no other payment of the user is in flight or unknown (whose
// payment it could be). Anything less stays PAYMENT_OUTCOME_UNKNOWN.
const (
	// settlePath is the creation route settling understands; the
	// open-banking init of an existing payment is not settled.
	settlePath = "/v2/payments"
	// settleSkew allows for the clocks of the database and the upstream.
	settleSkew = 2 * time.Minute
	// settlePages bounds the list pages read (newest first, 100 a page).
	settlePages = 5
	// settleTimeout bounds the whole look-up.
	settleTimeout = 10 * time.Second
)

// settle looks for the payment the request claimed at claimedAt may have
// created. It returns the outcome to store and replay when it found it.
func (f *Forwarder) settle(ctx context.Context, st *callState, req ledger.Request, id int64, claimedAt time.Time, body []byte) (ledger.Outcome, bool) {
	if st.path != settlePath {
		return ledger.Outcome{}, false
	}
	var sent struct {
		Info        map[string]any `json:"paymentInformation"`
		RedirectURL string         `json:"redirectUrl"`
	}
	if json.Unmarshal(body, &sent) != nil || len(sent.Info) == 0 {
		return ledger.Outcome{}, false
	}
	ctx, cancel := context.WithTimeout(ctx, settleTimeout)
	defer cancel()
	since := claimedAt.Add(-settleSkew)
	n, err := f.ledger.Neighbours(ctx, req, id, since)
	if err != nil || n.Open {
		return ledger.Outcome{}, false
	}
	var found []listedPayment
	next := ""
	for page := 0; page < settlePages; page++ {
		items, cursor, err := f.listPayments(ctx, st, next)
		if err != nil {
			f.log.Warn("settling a payment: the payment list could not be read", slog.String("requestId", st.RequestID), slog.String("error", problem.CauseText(err)))
			return ledger.Outcome{}, false
		}
		older := false
		for _, p := range items {
			if p.CreatedAt.Before(since) {
				older = true
				continue
			}
			if !n.Taken[p.ID] && p.ID != "" && sameInformation(sent.Info, p.Info) &&
				(sent.RedirectURL == "" || sent.RedirectURL == p.RedirectURL) {
				found = append(found, p)
			}
		}
		if older || cursor == "" {
			break
		}
		next = cursor
	}
	if len(found) != 1 {
		if len(found) > 1 {
			f.log.Warn("settling a payment: several payments match; leaving the outcome unknown", slog.String("requestId", st.RequestID), slog.Int("matches", len(found)))
		}
		return ledger.Outcome{}, false
	}
	p := found[0]
	reply, _ := json.Marshal(struct {
		ID     string `json:"id"`
		PayURL string `json:"payUrl,omitempty"`
	}{p.ID, p.PayURL})
	return ledger.Outcome{
		Ending: ledger.EndSettled, PaymentID: p.ID,
		Response: &ledger.Response{Status: http.StatusCreated, Header: http.Header{"Content-Type": {"application/json"}}, Body: reply},
	}, true
}

// matchKey hashes what settling compares of a payment request: its
// paymentInformation and redirectUrl, normalised as sameInformation
// compares them (numbers by value, IBANs without spaces or case). Two
// requests with the same key are the ones settling could confuse. nil when
// the body is not a JSON object.
func matchKey(body []byte) []byte {
	var v struct {
		Info        map[string]any `json:"paymentInformation"`
		RedirectURL string         `json:"redirectUrl"`
	}
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

type listedPayment struct {
	ID          string         `json:"id"`
	PayURL      string         `json:"payUrl"`
	RedirectURL string         `json:"redirectUrl"`
	CreatedAt   time.Time      `json:"createdAt"`
	Info        map[string]any `json:"paymentInformation"`
}

// listPayments reads one page of the user's payments, newest first, through
// the upstream transport (the user's token, the 401 re-mint, the GET
// retries).
func (f *Forwarder) listPayments(ctx context.Context, st *callState, cursor string) ([]listedPayment, string, error) {
	q := url.Values{"limit": {"100"}, "sort": {"-1"}}
	if cursor != "" {
		q.Set("nextPage", cursor)
	}
	u := *f.base
	u.Path = strings.TrimSuffix(u.Path, "/") + settlePath
	u.RawQuery = q.Encode()
	lst := &callState{Call: st.Call, path: settlePath, route: settlePath}
	req, err := http.NewRequestWithContext(context.WithValue(ctx, callKey{}, lst), http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, "", err
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("X-Request-Id", st.RequestID)
	resp, err := f.upstream.RoundTrip(req)
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, "", &statusError{resp.StatusCode}
	}
	var page struct {
		Items    []listedPayment `json:"items"`
		NextPage any             `json:"nextPage"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 8<<20)).Decode(&page); err != nil {
		return nil, "", err
	}
	next := ""
	switch v := page.NextPage.(type) {
	case string:
		next = v
	case float64:
		next = strconv.FormatFloat(v, 'f', -1, 64)
	}
	return page.Items, next, nil
}

type statusError struct{ status int }

func (e *statusError) Error() string { return "the upstream answered " + strconv.Itoa(e.status) }

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
