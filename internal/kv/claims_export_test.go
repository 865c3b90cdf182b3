package kv

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

// Queued is how many claims wait for the next batch.
func (c *Claims) Queued() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.pending)
}

// Idle reports whether no batch is being sent and none waits.
func (c *Claims) Idle() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return !c.busy && len(c.pending) == 0
}

// ClaimOn is Redis.SetNX's script sent through s, for the benchmark of
// go-redis's AutoPipeliner.
func ClaimOn(ctx context.Context, s redis.Scripter, key string, value []byte, ttl time.Duration) (bool, error) {
	n, err := setIfAbsentOrOwn.Run(ctx, s, []string{key}, value, ttl.Milliseconds()).Int()
	return n == 1, err
}
