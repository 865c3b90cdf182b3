//go:build integration

package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fintech-bff/bff/internal/upstreamsim"
)

// sseEvent is one event of GET /bff/events.
type sseEvent struct {
	ID, Event string
	Data      paymentRecord
}

type paymentRecord struct {
	Key, Route, State, PaymentID string
	Status                       int
	PaymentStatus                *string
}

// stream is an open GET /bff/events read on its own goroutine: events
// arrive on events, and done is closed when the server ends the stream.
type stream struct {
	events   chan sseEvent
	comments chan string
	retries  chan string
	done     chan struct{}
	cancel   context.CancelFunc
	last     string // the id of the last event next returned
}

// openStream opens the event stream at base with the session token, from
// lastID ("" for now), and fails the test unless it is 200
// text/event-stream.
func openStream(t *testing.T, base, token, lastID string) *stream {
	t.Helper()
	resp, err := tryStream(base, token, lastID)
	if err != nil {
		t.Fatal(err)
	}
	return readStream(t, resp)
}

// readStream reads an answer of GET /bff/events as openStream does, and
// fails the test unless it is 200 text/event-stream.
func readStream(t *testing.T, resp *http.Response) *stream {
	t.Helper()
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		resp.Body.Close()
		t.Fatalf("GET /bff/events: got %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &stream{events: make(chan sseEvent, 100), comments: make(chan string, 100), retries: make(chan string, 10), done: make(chan struct{}), cancel: cancel}
	t.Cleanup(s.close)
	go func() {
		defer close(s.done)
		defer resp.Body.Close()
		go func() { <-ctx.Done(); resp.Body.Close() }()
		sc := bufio.NewScanner(resp.Body)
		var ev sseEvent
		var data string
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if data != "" {
					if err := json.Unmarshal([]byte(data), &ev.Data); err != nil {
						t.Errorf("event data %q: %v", data, err)
					}
					s.events <- ev
				}
				ev, data = sseEvent{}, ""
			case strings.HasPrefix(line, ":"):
				s.comments <- strings.TrimSpace(line[1:])
			case strings.HasPrefix(line, "id: "):
				ev.ID = line[4:]
			case strings.HasPrefix(line, "event: "):
				ev.Event = line[7:]
			case strings.HasPrefix(line, "data: "):
				data += line[6:]
			case strings.HasPrefix(line, "retry: "):
				s.retries <- line[7:]
			}
		}
	}()
	return s
}

func tryStream(base, token, lastID string) (*http.Response, error) {
	req, _ := http.NewRequest("GET", base+"/bff/events", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	return http.DefaultClient.Do(req)
}

func (s *stream) close() { s.cancel() }

// next returns the next event, failing the test after wait.
func (s *stream) next(t *testing.T, wait time.Duration) sseEvent {
	t.Helper()
	select {
	case ev := <-s.events:
		if ev.Event != "payment" {
			t.Fatalf("got event %q, want payment", ev.Event)
		}
		s.last = ev.ID
		return ev
	case <-s.done:
		t.Fatal("the stream ended")
	case <-time.After(wait):
		t.Fatalf("no event within %s", wait)
	}
	return sseEvent{}
}

// until returns the first event whose payment status is want, failing
// after wait.
func (s *stream) until(t *testing.T, want string, wait time.Duration) sseEvent {
	t.Helper()
	deadline := time.Now().Add(wait)
	for {
		ev := s.next(t, time.Until(deadline))
		if ev.Data.PaymentStatus != nil && *ev.Data.PaymentStatus == want {
			return ev
		}
	}
}

// ended waits until the server has closed the stream.
func (s *stream) ended(t *testing.T, wait time.Duration, what string) {
	t.Helper()
	select {
	case <-s.done:
	case <-time.After(wait):
		t.Fatalf("%s: the stream is still open after %s", what, wait)
	}
}

// pay makes a payment as the session token through e and returns its id.
func pay(t *testing.T, e *env, token, key string) string {
	t.Helper()
	r := e.app(token).do("POST", "/api/v2/payments", fmt.Sprintf(validPayment, "Order "+key), "Idempotency-Key", key)
	if r.status != 201 {
		t.Fatalf("payment %s: got %d %s", key, r.status, r.body)
	}
	id, _ := r.json(t)["id"].(string)
	return id
}

// polls counts the simulator's GET /v2/payments/{id} so far, by the
// instance that sent each (named at the end of its X-Request-Id).
func polls(sim *upstreamsim.Server, id string) (n int, lastRequestID string) {
	for _, r := range sim.Requests() {
		if r.Method == "GET" && r.Path == "/v2/payments/"+id {
			n++
			lastRequestID = r.Header.Get("X-Request-Id") // "<poll id>-<instance>"; an instance id may hold a "-" too
		}
	}
	return n, lastRequestID
}

func num(t *testing.T, id string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(id, 10, 64)
	if err != nil {
		t.Fatalf("event id %q is not a number", id)
	}
	return n
}

var instanceRE = regexp.MustCompile(`"msg":"bff started","instance":"([^"]+)"`)

func instanceOf(t *testing.T, e *env) string {
	t.Helper()
	m := instanceRE.FindStringSubmatch(e.logs.String())
	if m == nil {
		t.Fatalf("no instance in the start-up line:\n%s", e.logs)
	}
	return m[1]
}

// Three instances behind the shipped HAProxy config: a stream on A, the
// payment made through B, its status moved at the simulator; the event
// reaches A within the poll interval and a second. The upstream is polled
// once per payment per interval cluster-wide, however many streams are
// open. The instance polling when it is killed hands the payment to
// another. A stream reconnected with Last-Event-ID gets what it missed,
// and nothing twice. Run against both reply profiles of the simulator:
// the full one, and the one that sends only what the API documents (no
// updatedAt on a payment).
func TestPaymentStatusReachesEveryInstance(t *testing.T) {
	for _, profile := range []string{upstreamsim.ProfileFull, upstreamsim.ProfileDocumented} {
		t.Run("profile="+profile, func(t *testing.T) { statusReachesEveryInstance(t, profile) })
	}
}

func statusReachesEveryInstance(t *testing.T, profile string) {
	const interval = 500 * time.Millisecond
	follow := fmt.Sprintf("payments: { watch_interval: %s, watch_max_interval: %s }", interval, interval)
	// A streams and does not poll: whichever instance polls can be killed
	// without ending the stream under test.
	a := start(t, options{sim: upstreamsim.Options{ReplyProfile: profile}, extraYAML: "payments: { watch_interval: 0s }"})
	b, c := a.another(options{extraYAML: follow}), a.another(options{extraYAML: follow})
	instances := []*env{a, b, c}
	l := startLB(t, instances)
	front := l.through(a)
	token := front.browser().login("live-user")

	s := openStream(t, a.public, token, "")
	// Streams on every instance, through the balancer too: they must not
	// add polls.
	for range 4 {
		openStream(t, l.url, token, "")
	}
	id := pay(t, b, token, "live-1")
	first := s.until(t, "INIT", 5*time.Second)
	if first.Data.Key != "live-1" || first.Data.PaymentID != id || first.Data.State != "done" || first.Data.Status != 201 {
		t.Fatalf("first event %+v, want live-1, done, 201, %s", first.Data, id)
	}

	t.Run("a status change reaches the stream within the interval and a second", func(t *testing.T) {
		// The upstream stamps updatedAt to the second: a status in the stored one's second is not newer.
		a.sim.Advance(time.Second)
		if err := a.sim.SetPaymentStatus("live-user", id, "ACTC"); err != nil {
			t.Fatal(err)
		}
		began := time.Now()
		s.until(t, "ACTC", 5*time.Second)
		if took := time.Since(began); took > interval+time.Second {
			t.Fatalf("the change took %s to reach the stream, want within %s", took, interval+time.Second)
		}
	})

	t.Run("one poll per payment per interval cluster-wide", func(t *testing.T) {
		before, _ := polls(a.sim, id)
		const window = 4 * time.Second
		time.Sleep(window) // deliberate: the polls are counted over this much real time, the clock the instances poll by
		after, _ := polls(a.sim, id)
		// Each poll is followed by the interval; the tick adds up to a
		// quarter of it. More than window/interval+1 means two instances
		// polled the same payment.
		if n, most := after-before, int(window/interval)+1; n < 2 || n > most {
			t.Fatalf("%d polls in %s with 3 instances and 5 streams, want between 2 and %d", n, window, most)
		}
	})

	t.Run("the polling instance killed, another takes over", func(t *testing.T) {
		// The next poll hangs at the simulator, so its instance dies
		// holding the lease.
		n0, _ := polls(a.sim, id)
		a.sim.InjectFault(upstreamsim.Fault{Method: "GET", PathPrefix: "/v2/payments/" + id, Delay: 20 * time.Second, Times: 1})
		var poller string
		eventually(t, 5*time.Second, func() error {
			n, last := polls(a.sim, id)
			if n <= n0 {
				return errors.New("no poll reached the simulator")
			}
			poller = last
			return nil
		})
		var victim *env
		for _, e := range []*env{b, c} {
			if strings.HasSuffix(poller, "-"+instanceOf(t, e)) {
				victim = e
			}
		}
		if victim == nil {
			t.Fatalf("the poll came from %q, not B (%s) or C (%s)", poller, instanceOf(t, b), instanceOf(t, c))
		}
		victim.kill()
		// The upstream stamps updatedAt to the second: a status in the stored one's second is not newer.
		a.sim.Advance(time.Second)
		if err := a.sim.SetPaymentStatus("live-user", id, "ACSP"); err != nil {
			t.Fatal(err)
		}
		// The lease (10 s) runs out, the other instance polls.
		s.until(t, "ACSP", 15*time.Second)
	})

	t.Run("Last-Event-ID resumes with what was missed, nothing twice", func(t *testing.T) {
		last := s.last
		s.close()
		// The upstream stamps updatedAt to the second: a status in the stored one's second is not newer.
		a.sim.Advance(time.Second)
		if err := a.sim.SetPaymentStatus("live-user", id, "ACSC"); err != nil {
			t.Fatal(err)
		}
		id2 := pay(t, front, token, "live-2")
		// Wait until the ledger has both changes (the list shows them).
		eventually(t, 15*time.Second, func() error {
			var rec paymentRecord
			r := front.app(token).do("GET", "/bff/payments/live-1", "")
			_ = json.Unmarshal(r.body, &rec)
			if rec.PaymentStatus == nil || *rec.PaymentStatus != "ACSC" {
				return fmt.Errorf("the ledger never learned ACSC: %s", r.body)
			}
			return nil
		})
		again := openStream(t, l.url, token, last)
		seen := map[string]int{}
		var got []sseEvent
		for len(got) < 2 {
			ev := again.next(t, 5*time.Second)
			got = append(got, ev)
			seen[ev.Data.Key]++
		}
		if num(t, got[0].ID) <= num(t, last) || num(t, got[1].ID) <= num(t, got[0].ID) {
			t.Fatalf("ids %s then %s after %s, want increasing", got[0].ID, got[1].ID, last)
		}
		// live-1 once, in its latest state; live-2 once (it may come again
		// later, as its own status moves).
		if seen["live-1"] != 1 || seen["live-2"] != 1 {
			t.Fatalf("resumed with %+v, want live-1 and live-2 once each", got)
		}
		for _, ev := range got {
			if ev.Data.Key == "live-1" && (ev.Data.PaymentStatus == nil || *ev.Data.PaymentStatus != "ACSC") {
				t.Fatalf("live-1 resumed as %+v, want ACSC", ev.Data)
			}
			if ev.Data.Key == "live-2" && ev.Data.PaymentID != id2 {
				t.Fatalf("live-2 resumed as %+v, want payment %s", ev.Data, id2)
			}
		}
	})
}

// An upstream that sends only what the API documents (no updatedAt on a
// payment): a status that changes at the bank still reaches a stream on
// another instance within the poll interval and a second, and a final one
// ends it (the follower dates a polled status when it stores it).
func TestPaymentStatusReachesAnotherInstanceWithDocumentedFields(t *testing.T) {
	const interval = 500 * time.Millisecond
	follow := fmt.Sprintf("payments: { watch_interval: %s, watch_max_interval: %s }", interval, interval)
	o := options{sim: upstreamsim.Options{ReplyProfile: upstreamsim.ProfileDocumented}, extraYAML: "payments: { watch_interval: 0s }"}
	a := start(t, o)
	b := a.another(options{extraYAML: follow})
	token := a.browser().login("documented-user")
	s := openStream(t, a.public, token, "")
	id := pay(t, b, token, "documented-1")
	s.until(t, "INIT", 5*time.Second)
	for _, status := range []string{"ACTC", "ACSP", "ACSC"} {
		if err := a.sim.SetPaymentStatus("documented-user", id, status); err != nil {
			t.Fatal(err)
		}
		began := time.Now()
		s.until(t, status, 5*time.Second)
		if took := time.Since(began); took > interval+time.Second {
			t.Fatalf("%s took %s to reach the stream on the other instance, want within %s", status, took, interval+time.Second)
		}
	}
}
