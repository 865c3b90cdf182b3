package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// maxPayAttempts bounds a payment's sends: the first and the repeats of a
// lost answer. The BFF pays at most once per key, so a repeat is safe; a
// bound keeps an app that cannot reach the BFF from trying forever.
const maxPayAttempts = 4

// backoff is the wait before a payment's repeat: 0.5 s, 1 s, 2 s.
func backoff(attempt int) time.Duration { return 250 * time.Millisecond << attempt }

var currencyRE = regexp.MustCompile(`^[A-Z]{3}$`)

// pay makes one payment (POST /api/v2/payments) under a fresh
// Idempotency-Key, and sends the same body under the same key again when
// its answer is lost: the BFF then replays the first answer
// (Idempotent-Replayed: true) and never pays twice (docs/payments.md).
func (a *app) pay(ctx context.Context, argv []string) error {
	fs := flag.NewFlagSet("pay", flag.ContinueOnError)
	key := fs.String("key", "", "the Idempotency-Key; default a new one. Give the key of a payment whose answer was lost to ask again")
	creditor := fs.String("creditor", "Dana Levi", "the creditor's name")
	iban := fs.String("iban", "IL620108000000099999999", "the creditor's IBAN")
	provider := fs.String("provider", "demobank-sandbox", "the bank (a sandbox bank until the organization has production access)")
	remittance := fs.String("remittance", "", "the remittance information")
	args, err := a.subcommand("pay", "AMOUNT CURRENCY", 2, fs, argv)
	if err != nil {
		return err
	}
	if v, err := strconv.ParseFloat(args[0], 64); err != nil || v <= 0 {
		return fmt.Errorf("amount %q: want a positive number such as 12.5", args[0])
	}
	if !currencyRE.MatchString(args[1]) {
		return fmt.Errorf("currency %q: want an ISO 4217 code such as ILS", args[1])
	}
	s, err := a.session()
	if err != nil {
		return err
	}
	info := map[string]any{
		"amount":          json.Number(args[0]), // as typed: no float rounding on the way
		"currency":        args[1],
		"creditorName":    *creditor,
		"creditorAccount": map[string]string{"iban": *iban},
	}
	if *remittance != "" {
		info["remittanceInformation"] = *remittance
	}
	// One body for every send: the same key with another body is 422
	// IDEMPOTENCY_KEY_REUSED.
	body, err := json.Marshal(map[string]any{"paymentInformation": info, "providerIds": []string{*provider}})
	if err != nil {
		return err
	}
	if *key == "" {
		*key = newUUID()
	}
	// Said before the first send: should the app die with the answer
	// lost, the key is what asks for it again.
	fmt.Fprintf(a.stderr, "paying with Idempotency-Key %s\n", *key)
	r := request{method: http.MethodPost, path: "/api/v2/payments", body: body, session: s, header: http.Header{"Idempotency-Key": {*key}}}
	var wait time.Duration
	for attempt := 0; attempt < maxPayAttempts; attempt++ {
		if attempt > 0 {
			if wait == 0 {
				wait = a.retryWait(attempt)
			}
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return fmt.Errorf("stopped; the payment's answer is not known: run pay again with -key %s: %w", *key, ctx.Err())
			case <-t.C:
			}
			wait = 0
		}
		resp, err := a.bff.send(ctx, r)
		if err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("stopped; the payment's answer is not known: run pay again with -key %s: %w", *key, ctx.Err())
			}
			fmt.Fprintf(a.stderr, "no answer (%v): sending it again with the same Idempotency-Key\n", err)
			continue
		}
		if resp.StatusCode >= 200 && resp.StatusCode < 300 {
			var paid struct {
				ID     string `json:"id"`
				PayURL string `json:"payUrl"`
			}
			if err := decodeJSON(resp, &paid); err != nil {
				fmt.Fprintf(a.stderr, "the answer broke off (%v): sending it again with the same Idempotency-Key\n", err)
				continue
			}
			fmt.Fprintf(a.stdout, "paid status=%d key=%s id=%s replayed=%t payUrl=%s\n",
				resp.StatusCode, *key, paid.ID, resp.Header.Get("Idempotent-Replayed") == "true", paid.PayURL)
			return nil
		}
		retryAfter := resp.Header.Get("Retry-After")
		err = readProblem(resp)
		switch codeOf(err) {
		case "IDEMPOTENCY_IN_PROGRESS":
			// The first send is still running at the BFF: ask again.
			if secs, perr := strconv.Atoi(retryAfter); perr == nil && secs > 0 && secs <= 10 {
				wait = time.Duration(secs) * time.Second
			}
			fmt.Fprintf(a.stderr, "%v: asking again\n", err)
			continue
		case "PAYMENT_OUTCOME_UNKNOWN":
			// Never a new key here: the first one may have paid. The BFF
			// settles it; its record says when.
			return fmt.Errorf("%w; the BFF is settling it: see native payments, or call /bff/payments/%s", err, url.PathEscape(*key))
		}
		return err
	}
	return fmt.Errorf("no answer after %d tries: run pay again with -key %s, or call /bff/payments/%s to see whether it was made",
		maxPayAttempts, *key, url.PathEscape(*key))
}

// newUUID is a random (version 4) UUID, the usual Idempotency-Key.
func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// paymentRecord is an item of GET /bff/payments (docs/endpoints.md).
type paymentRecord struct {
	Key           string    `json:"key"`
	Route         string    `json:"route"`
	State         string    `json:"state"`
	Status        *int      `json:"status"`
	PaymentID     *string   `json:"paymentId"`
	PaymentStatus *string   `json:"paymentStatus"`
	CreatedAt     time.Time `json:"createdAt"`
}

func (p paymentRecord) String() string {
	status, id, ps := "-", "-", "-"
	if p.Status != nil {
		status = strconv.Itoa(*p.Status)
	}
	if p.PaymentID != nil {
		id = *p.PaymentID
	}
	if p.PaymentStatus != nil {
		ps = *p.PaymentStatus
	}
	return fmt.Sprintf("key=%s route=%s state=%s status=%s paymentId=%s paymentStatus=%s createdAt=%s",
		p.Key, p.Route, p.State, status, id, ps, p.CreatedAt.Format(time.RFC3339))
}

// payments lists the payments made through the BFF (GET /bff/payments).
func (a *app) payments(ctx context.Context, argv []string) error {
	fs := flag.NewFlagSet("payments", flag.ContinueOnError)
	limit := fs.Int("limit", 20, "how many, newest first (1 to 100)")
	if _, err := a.subcommand("payments", "", 0, fs, argv); err != nil {
		return err
	}
	s, err := a.session()
	if err != nil {
		return err
	}
	var page struct {
		Items      []paymentRecord `json:"items"`
		NextCursor string          `json:"nextCursor"`
	}
	if err := a.getJSON(ctx, s, "/bff/payments?limit="+strconv.Itoa(*limit), &page); err != nil {
		return err
	}
	for _, p := range page.Items {
		fmt.Fprintln(a.stdout, p)
	}
	if len(page.Items) == 0 {
		fmt.Fprintln(a.stderr, "no payments yet")
	}
	return nil
}

// maxReconnects bounds how often events opens the stream again after it
// ended (an instance shutting down sends a retry: hint first).
const maxReconnects = 5

// events reads GET /bff/events: the proof goes with the opening request
// only, and a stream that ends is opened again with a new proof and
// Last-Event-ID, so nothing is missed.
func (a *app) events(ctx context.Context, argv []string) error {
	fs := flag.NewFlagSet("events", flag.ContinueOnError)
	n := fs.Int("n", 0, "stop after this many events (0: no limit)")
	dur := fs.Duration("for", 0, "stop after this long (0: no limit)")
	last := fs.String("last-event-id", "", "resume after this event id")
	if _, err := a.subcommand("events", "", 0, fs, argv); err != nil {
		return err
	}
	s, err := a.session()
	if err != nil {
		return err
	}
	if *dur > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *dur)
		defer cancel()
	}
	seen := 0
	retry := time.Second
	for opened := 0; ; opened++ {
		h := http.Header{"Accept": {"text/event-stream"}}
		if *last != "" {
			h.Set("Last-Event-ID", *last)
		}
		resp, err := a.bff.send(ctx, request{method: http.MethodGet, path: "/bff/events", session: s, header: h, streaming: true})
		if ctx.Err() != nil {
			return a.eventsDone(seen, *n)
		}
		if err != nil {
			return err
		}
		if resp.StatusCode != http.StatusOK {
			return readProblem(resp)
		}
		fmt.Fprintln(a.stderr, "stream open")
		done, err := readEvents(resp.Body, func(ev sse) bool {
			if ev.id != "" {
				*last = ev.id
			}
			if ev.retry > 0 {
				retry = min(ev.retry, 5*time.Second)
			}
			if ev.data == "" {
				return false
			}
			seen++
			fmt.Fprintf(a.stdout, "event %s id=%s %s\n", ev.event, ev.id, ev.data)
			return *n > 0 && seen >= *n
		})
		resp.Body.Close()
		if done || ctx.Err() != nil {
			return a.eventsDone(seen, *n)
		}
		if opened >= maxReconnects {
			return fmt.Errorf("the stream ended %d times (last: %v)", opened+1, err)
		}
		fmt.Fprintf(a.stderr, "the stream ended (%v): opening it again in %s\n", err, retry)
		t := time.NewTimer(retry)
		select {
		case <-ctx.Done():
			t.Stop()
			return a.eventsDone(seen, *n)
		case <-t.C:
		}
	}
}

func (a *app) eventsDone(seen, n int) error {
	if n > 0 && seen < n {
		return fmt.Errorf("%d events of the %d asked for", seen, n)
	}
	return nil
}

// sse is one server-sent event.
type sse struct {
	event, id, data string
	retry           time.Duration
}

// readEvents reads server-sent events (the WHATWG format: field lines, a
// blank line ends an event, ":" starts a comment) and hands each to
// handle until it returns true (done) or the stream ends (err says how).
func readEvents(r io.Reader, handle func(sse) bool) (done bool, err error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20) // an event is a payment record: well under 1 MiB
	ev := sse{event: "message"}
	var data []string
	for sc.Scan() {
		line := strings.TrimSuffix(sc.Text(), "\r")
		if line == "" {
			ev.data = strings.Join(data, "\n")
			if handle(ev) {
				return true, nil
			}
			ev, data = sse{event: "message", id: ev.id}, nil
			continue
		}
		if strings.HasPrefix(line, ":") {
			continue // a keep-alive comment
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "event":
			ev.event = value
		case "data":
			data = append(data, value)
		case "id":
			ev.id = value
		case "retry":
			if ms, err := strconv.Atoi(value); err == nil && ms >= 0 {
				ev.retry = time.Duration(ms) * time.Millisecond
			}
		}
	}
	if err := sc.Err(); err != nil {
		return false, err
	}
	return false, errors.New("the BFF closed it")
}
