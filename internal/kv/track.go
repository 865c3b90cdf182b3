// Track is written here, not taken from go-redis's own client-side
// caching (github.com/redis/go-redis/v9 v9.23.0, ClientSideCacheConfig or
// a ClientSideCache; experimental). That cache is attached by NewClient
// only: it needs RESP3 and DB 0, and never runs behind Sentinel
// (NewFailoverClient) or a Cluster. It turns plain CLIENT TRACKING ON (the
// per-key mode, no BCAST) on every pooled connection, so the server keeps
// each key each connection read and never reports a key this instance did
// not read, such as a canary. Its invalidations are applied when their
// connection is next used or at a drainer tick; a connection that closes
// drops what it fetched, but nothing confirms the stream is current (an
// idle half-open connection just stays silent), and its only bound,
// MaxStaleness, is an age limit per entry, off by default, that at 800 ms
// would refetch every entry that often: nothing like Track's canary
// confirmations. Its Cache interface maps a serialized read command (some
// 70 kinds, not only GET) to the raw reply, with fetch reservations and
// indexes by Redis key and by connection, which localcache's byte rings
// keyed by store key lack; its own LocalCache is an approximate LRU of
// heap entries, bounded by count (10,000 by default) or estimated bytes.
// So Track stays: one BCAST subscription per instance, on a URL or
// Sentinel, with a confirmed bound (onConfirmed, trusted within LeaseFor).
package kv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// trackChannel is where Redis sends the invalidations of a connection
// whose tracking is redirected (RESP2).
const trackChannel = "__redis__:invalidate"

// trackCheckEvery is how often Track checks that Redis still tracks for
// it and that its subscription still answers.
const trackCheckEvery = 500 * time.Millisecond

// canaryEvery is how often Track writes a canary key through the main
// client: its invalidation coming back confirms every change made on
// that Redis before it was written (a Redis sends one client its
// invalidations in order). canaryTTL lets each canary key go by itself.
const (
	canaryEvery = 200 * time.Millisecond
	canaryTTL   = 2 * time.Second
	// canaryPrefix holds the canary keys (under the key prefix), tracked
	// too, apart from the callers' keys.
	canaryPrefix = "track-canary:"
)

// Tracker is a store that reports every change of the keys under some
// prefixes: Redis's Track. The in-process Memory store is not one (a
// single process needs no such reports).
type Tracker interface {
	Track(ctx context.Context, prefixes []string, onKey func(string), onReady func(bool), onConfirmed func(time.Time)) error
}

// LeaseFor is how recent Track's last confirmation (onConfirmed) must be
// for a caller to trust its local copies (the near-cache measures it on
// its own clock): a change can go unseen for at most about this long (plus
// its delivery), within the product's one second for a revocation;
// canaries come every 200 ms.
const LeaseFor = 800 * time.Millisecond

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
// blocks; run it in a goroutine. It returns once everything it started
// has ended (the canaries' writes too), so the store may close next. With a Cluster client it returns
// ErrTrackingUnsupported at once.
//
// onConfirmed is the time bound onReady is not (a half-open connection, a
// Sentinel switch the tracker did not follow): a canary key written every
// canaryEvery under canaryPrefix, never reported, comes back with the time
// it was written after every earlier change, and a caller trusts its copies
// only while that is recent (docs/operations.md, "Where the state lives").
func (r *Redis) Track(ctx context.Context, prefixes []string, onKey func(string), onReady func(bool), onConfirmed func(time.Time)) error {
	base, ok := r.client.(*redis.Client)
	if !ok {
		return ErrTrackingUnsupported
	}
	var id [6]byte
	_, _ = rand.Read(id[:])
	t := &tracker{r: r, base: base.Options(), prefixes: prefixes, onKey: onKey, onReady: onReady, onConfirmed: onConfirmed,
		canary: canaryPrefix + hex.EncodeToString(id[:]) + ":", sent: map[uint64]time.Time{}}
	defer t.closeClient()
	// The canaries' writes end before Track returns: the caller may
	// close the store next.
	var canaries sync.WaitGroup
	canaries.Go(func() { t.canaries(ctx) })
	t.run(ctx)
	canaries.Wait()
	return nil
}

// canaries writes a canary key every canaryEvery while the tracking is
// live, noting when each was written.
func (t *tracker) canaries(ctx context.Context) {
	tick := time.NewTicker(canaryEvery)
	defer tick.Stop()
	var seq uint64
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if !t.liveFlag.Load() {
			continue
		}
		seq++
		t.mu.Lock()
		for s, at := range t.sent { // never answered: forget
			if time.Since(at) > canaryTTL {
				delete(t.sent, s)
			}
		}
		t.sent[seq] = time.Now()
		t.mu.Unlock()
		wctx, cancel := context.WithTimeout(ctx, canaryEvery)
		_ = t.r.client.Set(wctx, t.r.prefix+t.canary+strconv.FormatUint(seq, 10), "1", canaryTTL).Err()
		cancel()
	}
}

// confirm reports the write time of the canary named by key when it is
// one of this tracker's (other trackers' canaries are tracked too).
func (t *tracker) confirm(key string) {
	rest, ok := strings.CutPrefix(key, t.canary)
	if !ok {
		return
	}
	seq, err := strconv.ParseUint(rest, 10, 64)
	if err != nil {
		return
	}
	t.mu.Lock()
	at, ok := t.sent[seq]
	delete(t.sent, seq) // its expiry, later, confirms nothing new
	t.mu.Unlock()
	if ok && t.live {
		t.onConfirmed(at)
	}
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

// tracker is one Track call's state; only its goroutine uses it, except
// mu, sent and liveFlag, shared with the canary goroutine.
type tracker struct {
	r           *Redis
	base        *redis.Options // the main client's, copied for each attempt
	client      *redis.Client  // this attempt's; nil between attempts
	name        string
	prefixes    []string
	onKey       func(string)
	onReady     func(bool)
	onConfirmed func(time.Time)

	canary   string // the canary keys' prefix (under prefixes[0]), then a sequence number
	mu       sync.Mutex
	sent     map[uint64]time.Time // canaries written, not yet seen back
	liveFlag atomic.Bool          // live, for the canary goroutine

	ps       *redis.PubSub
	conn     *redis.Conn // tracking is turned on on this connection
	redirect int64       // the subscription's client id; 0: not set up
	live     bool
	pinged   time.Time // the last PING on the subscription not yet answered
}

func (t *tracker) run(ctx context.Context) {
	defer t.down()
	backoff := 50 * time.Millisecond
	nextCheck := time.Now().Add(trackCheckEvery)
	for ctx.Err() == nil {
		if t.ps == nil {
			if t.client == nil {
				t.newClient()
			}
			t.ps = t.client.Subscribe(ctx, trackChannel)
		}
		// The checks run on time however busy the subscription is.
		if t.live && !time.Now().Before(nextCheck) {
			nextCheck = time.Now().Add(trackCheckEvery)
			if !t.check(ctx) {
				t.reset()
				continue
			}
		}
		wait := trackCheckEvery
		if t.live {
			wait = max(time.Until(nextCheck), time.Millisecond)
		}
		m, err := t.ps.ReceiveTimeout(ctx, wait)
		if ctx.Err() != nil {
			return
		}
		var nerr interface{ Timeout() bool }
		switch {
		case errors.As(err, &nerr) && nerr.Timeout():
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
		rest, ok := strings.CutPrefix(k, t.r.prefix)
		switch {
		case !ok:
		case strings.HasPrefix(rest, canaryPrefix):
			t.confirm(rest)
		default:
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
	for _, p := range append(slices.Clone(t.prefixes), canaryPrefix) {
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
		t.liveFlag.Store(true)
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
		t.liveFlag.Store(false)
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
