package kv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// trackChannel is where Redis sends the invalidations of a connection
// whose tracking is redirected (RESP2).
const trackChannel = "__redis__:invalidate"

// trackCheckEvery is how often Track checks, when no invalidation comes,
// that Redis still tracks for it and that its subscription still answers:
// a change it cannot see is seen within about twice this.
const trackCheckEvery = 500 * time.Millisecond

// Tracker is a store that reports every change of the keys under some
// prefixes: Redis's Track. The in-process Memory store is not one (a
// single process needs no such reports).
type Tracker interface {
	Track(ctx context.Context, prefixes []string, onKey func(string), onReady func(bool)) error
}

var _ Tracker = (*Redis)(nil)

// ErrTrackingUnsupported is Track's answer for a Redis Cluster client:
// tracking there is per node, and Track does not follow the slots.
var ErrTrackingUnsupported = errors.New("kv: key tracking needs a single Redis (a URL or Sentinel), not a Cluster")

// Track reports, until ctx ends, every key under the key prefix + one of
// prefixes that any client changes, deletes, or that expires or is evicted,
// with the key prefix removed; a flush of the whole database is reported
// as the key "". It is Redis's server-assisted client-side caching: the
// server itself sends an invalidation for every change under the prefixes
// (CLIENT TRACKING ... BCAST), so no writer can forget to announce one.
//
// onReady(true) marks the tracking live, onReady(false) lost: while it is
// lost, changes may go unseen, so a caller drops every local copy on
// false and keeps none until true. Track checks every trackCheckEvery that
// the server still tracks for it (a reconnected or killed connection
// stops that silently) and that its subscription answers a PING. It
// blocks; run it in a goroutine. With a Cluster client it returns
// ErrTrackingUnsupported at once.
//
// Not yet a time bound: a connection that goes half-open, or an instance
// cut off from Redis, is noticed only after the checks' timeouts (about
// 1–2 s), and after a Sentinel switch the tracker may keep following the
// old master while it stays reachable. A caller that must bound how long
// a change can go unseen needs more than onReady: a lease renewed by a
// write through the main client whose invalidation comes back (issue 14).
func (r *Redis) Track(ctx context.Context, prefixes []string, onKey func(string), onReady func(bool)) error {
	base, ok := r.client.(*redis.Client)
	if !ok {
		return ErrTrackingUnsupported
	}
	t := &tracker{r: r, base: base.Options(), prefixes: prefixes, onKey: onKey, onReady: onReady}
	defer t.closeClient()
	t.run(ctx)
	return nil
}

// newClient makes the tracker's own client, under a name no earlier
// attempt used: CLIENT LIST then finds this attempt's subscription, never
// an older one the server still holds (a half-open connection).
func (t *tracker) newClient() {
	var id [6]byte
	_, _ = rand.Read(id[:])
	opt := *t.base
	// Two connections: the subscription and the one that turns tracking on.
	opt.ClientName = "bff-track-" + hex.EncodeToString(id[:])
	opt.PoolSize, opt.MinIdleConns, opt.MaxIdleConns = 2, 0, 2
	// RESP2: the invalidations then come as messages on trackChannel,
	// which PubSub reads, rather than as RESP3 pushes; no maintenance
	// notifications (they need RESP3, and a copied configuration would
	// register their handlers twice).
	opt.Protocol = 2
	opt.MaintNotificationsConfig = &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
	t.client, t.name = redis.NewClient(&opt), opt.ClientName
}

func (t *tracker) closeClient() {
	if t.client != nil {
		_ = t.client.Close()
		t.client = nil
	}
}

// tracker is one Track call's state; only its goroutine uses it.
type tracker struct {
	r        *Redis
	base     *redis.Options // the main client's, copied for each attempt
	client   *redis.Client  // this attempt's; nil between attempts
	name     string
	prefixes []string
	onKey    func(string)
	onReady  func(bool)

	ps       *redis.PubSub
	conn     *redis.Conn // tracking is turned on on this connection
	redirect int64       // the subscription's client id; 0: not set up
	live     bool
	pinged   time.Time // the last PING on the subscription not yet answered
}

func (t *tracker) run(ctx context.Context) {
	defer t.down()
	backoff := 50 * time.Millisecond
	for ctx.Err() == nil {
		if t.ps == nil {
			if t.client == nil {
				t.newClient()
			}
			t.ps = t.client.Subscribe(ctx, trackChannel)
		}
		m, err := t.ps.ReceiveTimeout(ctx, trackCheckEvery)
		if ctx.Err() != nil {
			return
		}
		var nerr interface{ Timeout() bool }
		switch {
		case errors.As(err, &nerr) && nerr.Timeout():
			if !t.check(ctx) {
				t.reset()
			}
			continue
		case err != nil && strings.Contains(err.Error(), "unsupported pubsub message payload: <nil>"):
			// A null invalidation: the database was flushed. go-redis
			// cannot parse it but the connection is fine.
			t.onKey("")
			continue
		case err != nil:
			t.reset()
			if !sleep(ctx, backoff) {
				return
			}
			backoff = min(2*backoff, 2*time.Second)
			continue
		}
		switch m := m.(type) {
		case *redis.Subscription:
			if m.Kind == "subscribe" {
				if err := t.setUp(ctx); err != nil {
					t.reset()
					if !sleep(ctx, backoff) {
						return
					}
					backoff = min(2*backoff, 2*time.Second)
					continue
				}
				backoff = 50 * time.Millisecond
			}
		case *redis.Pong:
			t.pinged = time.Time{}
		case *redis.Message:
			t.deliver(m)
		}
	}
}

// deliver reports the keys of one invalidation message.
func (t *tracker) deliver(m *redis.Message) {
	keys := m.PayloadSlice
	if keys == nil && m.Payload != "" {
		keys = []string{m.Payload}
	}
	for _, k := range keys {
		if rest, ok := strings.CutPrefix(k, t.r.prefix); ok {
			t.onKey(rest)
		}
	}
}

// setUp turns tracking on, redirected to the subscription, once the
// subscription is confirmed, and marks the tracking live.
func (t *tracker) setUp(ctx context.Context) error {
	// Changes between here and TRACKING ON go unseen: not live meanwhile.
	t.down()
	id, err := t.subscriberID(ctx)
	if err != nil {
		return err
	}
	if t.conn == nil {
		// Ephemeral: closed, the connection is discarded, not pooled with
		// tracking still on.
		t.conn = t.client.EphemeralConn()
	}
	args := []any{"CLIENT", "TRACKING", "ON", "REDIRECT", id, "BCAST"}
	for _, p := range t.prefixes {
		args = append(args, "PREFIX", t.r.prefix+p)
	}
	// OFF first: ON with another redirect or other prefixes is refused
	// while tracking is on.
	if err := t.conn.Do(ctx, "CLIENT", "TRACKING", "OFF").Err(); err != nil {
		return err
	}
	if err := t.conn.Do(ctx, args...).Err(); err != nil {
		return err
	}
	t.redirect = id
	if !t.live {
		t.live = true
		t.onReady(true)
	}
	return nil
}

// subscriberID finds the subscription's connection by the tracker's
// client name and its subscription flag.
func (t *tracker) subscriberID(ctx context.Context) (int64, error) {
	list, err := t.client.ClientList(ctx).Result()
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(list, "\n") {
		f := fields(line)
		if f["name"] == t.name && f["sub"] != "" && f["sub"] != "0" {
			return strconv.ParseInt(f["id"], 10, 64)
		}
	}
	return 0, fmt.Errorf("kv: the tracking subscription %s is not in CLIENT LIST", t.name)
}

// fields parses one CLIENT LIST line ("id=7 addr=… name=… sub=1 …").
func fields(line string) map[string]string {
	out := map[string]string{}
	for _, kv := range strings.Fields(line) {
		if k, v, ok := strings.Cut(kv, "="); ok {
			out[k] = v
		}
	}
	return out
}

// check reports whether the server still tracks for the subscription, and
// the subscription answered the last PING; it sends the next one.
func (t *tracker) check(ctx context.Context) bool {
	if t.redirect == 0 {
		return false
	}
	if !t.pinged.IsZero() && time.Since(t.pinged) > 2*trackCheckEvery {
		return false // the subscription stopped answering
	}
	// Bounded, so a Redis that stopped answering is noticed within about
	// two check periods rather than the client's read timeout.
	ctx, cancel := context.WithTimeout(ctx, trackCheckEvery)
	defer cancel()
	info, err := t.conn.Do(ctx, "CLIENT", "TRACKINGINFO").Result()
	if err != nil || !trackingOK(info, t.redirect) {
		return false
	}
	if t.pinged.IsZero() {
		if err := t.ps.Ping(ctx); err != nil {
			return false
		}
		t.pinged = time.Now()
	}
	return true
}

// trackingOK reads CLIENT TRACKINGINFO's answer: tracking on, in BCAST
// mode, redirected to redirect, and the redirect not broken.
func trackingOK(info any, redirect int64) bool {
	var flags []any
	var to int64 = -1
	switch v := info.(type) {
	case map[any]any: // RESP3
		flags, _ = v["flags"].([]any)
		to, _ = v["redirect"].(int64)
	case []any: // RESP2: a flat list of names and values
		for i := 0; i+1 < len(v); i += 2 {
			switch v[i] {
			case "flags":
				flags, _ = v[i+1].([]any)
			case "redirect":
				to, _ = v[i+1].(int64)
			}
		}
	}
	on, bcast := false, false
	for _, f := range flags {
		switch f {
		case "on":
			on = true
		case "bcast":
			bcast = true
		case "broken_redirect":
			return false
		}
	}
	return on && bcast && to == redirect
}

// reset marks the tracking lost and drops this attempt's client and both
// its connections, so the next round starts afresh under a new name. The
// old subscription is killed on the server too, should it linger there
// half-open.
func (t *tracker) reset() {
	t.down()
	if t.redirect != 0 {
		ctx, cancel := context.WithTimeout(context.Background(), trackCheckEvery)
		_ = t.r.client.Do(ctx, "CLIENT", "KILL", "ID", t.redirect).Err()
		cancel()
	}
	if t.ps != nil {
		_ = t.ps.Close()
		t.ps = nil
	}
	if t.conn != nil {
		_ = t.conn.Close()
		t.conn = nil
	}
	t.closeClient()
	t.redirect = 0
	t.pinged = time.Time{}
}

func (t *tracker) down() {
	if t.live {
		t.live = false
		t.onReady(false)
	}
}

// sleep waits d or until ctx ends, reporting whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-tm.C:
		return true
	}
}
