package kv

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// DefaultClaimBatch is how many claims Claims sends in one pipeline at most
// (a few KB written, and read, at once); those beyond go in the next.
const DefaultClaimBatch = 64

// Claims is Redis.SetNX for many concurrent callers: claims that arrive
// while one round trip is in flight are sent together in the next, one
// EVALSHA each in one pipeline, so the write and read system calls that cost
// a claim most of its CPU are shared (BenchmarkClaims, claims_bench_test.go,
// has the figures). A caller with no round trip in flight sends its claim at
// once: batching adds no wait, no timer and no goroutine. Each claim keeps
// SetNX's meaning, key by key (a pipeline is not a transaction; on a
// Cluster go-redis splits it by node).
//
// It is the package's own although go-redis (v9.23) has an AutoPipeliner:
// that one is marked experimental, runs goroutines of its own, and holds a
// batch for the callers of the one before to send again (silence gaps of
// 200 µs to 2 ms), which suits a loop of commands, not a request whose one
// claim is followed by other work.
//
// Claims is safe for concurrent use. It does not own the store's client.
type Claims struct {
	r   *Redis
	max int

	mu      sync.Mutex
	pending []*claim // in arrival order; pending[0] sends the next batch
	busy    bool     // a caller is sending a batch, or has been told to
}

// claim is one caller's SetNX, and where its outcome goes.
type claim struct {
	key   string // with the store's prefix
	value string // a copy: it may be sent after its caller has gone
	ttl   time.Duration
	lead  bool        // told to send the next batch; set under Claims.mu
	done  chan result // buffered: a batch never waits for a caller
}

type result struct {
	ok   bool
	err  error
	lead bool // not a result: send the next batch
}

// NewClaims returns a Claims on r's client and key prefix that sends at most
// max claims in one pipeline (DefaultClaimBatch when max <= 0).
func NewClaims(r *Redis, max int) *Claims {
	if max <= 0 {
		max = DefaultClaimBatch
	}
	return &Claims{r: r, max: max}
}

// SetNX is Redis.SetNX: it stores value at key for ttl only when key is
// absent, and reports whether key now holds value. A Redis failure is an
// ErrUnavailable, and so is ctx's end while the claim waits for a batch,
// which also wraps ctx's error (the claim may then still be made). The
// caller that sends a batch waits for its answer, as a single SetNX does.
func (c *Claims) SetNX(ctx context.Context, key string, value []byte, ttl time.Duration) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, ended(err)
	}
	cl := &claim{key: c.r.prefix + key, value: string(value), ttl: ttl, done: make(chan result, 1)}
	c.mu.Lock()
	c.pending = append(c.pending, cl)
	if !c.busy {
		c.busy, cl.lead = true, true // pending was empty: cl is pending[0]
	}
	lead := cl.lead
	c.mu.Unlock()
	if !lead {
		select {
		case r := <-cl.done:
			if !r.lead {
				return r.ok, r.err
			}
		case <-ctx.Done():
			c.leave(cl)
			return false, ended(ctx.Err())
		}
	}
	c.send(ctx)
	r := <-cl.done
	return r.ok, r.err
}

// ended is the error of a claim whose caller's context ended: an
// ErrUnavailable, as a single SetNX's, that also wraps the context's error.
func ended(err error) error { return fmt.Errorf("%w: setnx: %w", ErrUnavailable, err) }

// leave takes cl out of the pending claims when its caller's context
// ends, and when cl had been told to send the next batch, tells the next
// pending claim instead (its message to cl stays unread). A claim already
// in a batch stays in it: its result goes to its buffered channel, unread.
func (c *Claims) leave(cl *claim) {
	c.mu.Lock()
	defer c.mu.Unlock()
	i := slices.Index(c.pending, cl)
	if i < 0 {
		return
	}
	c.pending = slices.Delete(c.pending, i, i+1)
	if cl.lead {
		c.next()
	}
}

// send sends the pending claims, up to c.max, in one round trip, gives each
// its result, and tells the next pending claim, if any, to send the next
// batch. The batch is sent on ctx without its cancellation, since it
// carries the other callers' claims too: the client's dial, read, write
// and pool timeouts bound it, as they bound a single SetNX.
func (c *Claims) send(ctx context.Context) {
	c.mu.Lock()
	n := min(len(c.pending), c.max)
	batch := slices.Clone(c.pending[:n])
	c.pending = slices.Delete(c.pending, 0, n)
	c.mu.Unlock()
	defer func() { // even if exec panics (recovered by a handler): the waiting claims must not wait forever
		c.mu.Lock()
		c.next()
		c.mu.Unlock()
	}()
	c.exec(context.WithoutCancel(ctx), batch)
}

// next tells the first pending claim to send the next batch, or marks
// that no batch is being sent. c.mu must be held.
func (c *Claims) next() {
	if len(c.pending) == 0 {
		c.busy = false
		return
	}
	first := c.pending[0]
	first.lead = true
	first.done <- result{lead: true}
}

// exec sends batch and delivers each claim's result: one claim as SetNX
// sends it, more in one pipeline of EVALSHA, and again with the script's
// source for those a node answered NOSCRIPT (a restarted or new node).
func (c *Claims) exec(ctx context.Context, batch []*claim) {
	if len(batch) == 1 {
		cl := batch[0]
		n, err := setIfAbsentOrOwn.Run(ctx, c.r.client, []string{cl.key}, cl.value, cl.ttl.Milliseconds()).Int()
		if err != nil {
			cl.done <- result{err: unavailable("setnx", err)}
			return
		}
		cl.done <- result{ok: n == 1}
		return
	}
	cmds := make([]*redis.Cmd, len(batch))
	pipe := c.r.client.Pipeline()
	for i, cl := range batch {
		cmds[i] = setIfAbsentOrOwn.EvalSha(ctx, pipe, []string{cl.key}, cl.value, cl.ttl.Milliseconds())
	}
	_, execErr := pipe.Exec(ctx)
	var again redis.Pipeliner
	for i, cl := range batch {
		if redis.HasErrorPrefix(cmds[i].Err(), "NOSCRIPT") {
			if again == nil {
				again = c.r.client.Pipeline()
			}
			cmds[i] = setIfAbsentOrOwn.Eval(ctx, again, []string{cl.key}, cl.value, cl.ttl.Milliseconds())
		}
	}
	if again != nil {
		if _, err := again.Exec(ctx); err != nil {
			execErr = err
		}
	}
	for i, cl := range batch {
		n, err := cmds[i].Int()
		if err != nil {
			if cmds[i].Err() == nil && execErr != nil {
				err = execErr // never sent (a hook refused the pipeline): its zero value is no answer
			}
			cl.done <- result{err: unavailable("setnx", err)}
			continue
		}
		cl.done <- result{ok: n == 1}
	}
}
