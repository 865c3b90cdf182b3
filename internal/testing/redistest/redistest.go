// Package redistest gives tests a real Redis: the server at
// BFF_TEST_REDIS_ADDR (default 127.0.0.1:6379), with a key prefix of the
// test's own that is deleted when the test ends. When no Redis answers the
// test fails, it never skips: `make test` starts a throwaway redis-server
// when none is running, and CI installs one.
//
// For the topologies production runs, StartCluster and StartSentinel start
// redis-server processes of the test's own (a Cluster of masters; a master,
// a replica and a Sentinel) on free loopback ports, and kill them when the
// test ends. They need redis-server and redis-cli on the PATH, and fail the
// test, never skip it, when those are missing.
package redistest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Addr is the test Redis address.
func Addr() string {
	if a := os.Getenv("BFF_TEST_REDIS_ADDR"); a != "" {
		return a
	}
	return "127.0.0.1:6379"
}

// Client returns a client to the test Redis and a fresh key prefix; both
// are cleaned up when t ends.
func Client(t testing.TB) (*redis.Client, string) {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: Addr(), DialTimeout: 2 * time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		_ = c.Close()
		t.Fatalf("no Redis answers at %s (%v): run the tests with `make test`, which starts one, "+
			"or install redis-server (apt-get install -y redis-server) or set BFF_TEST_REDIS_ADDR", Addr(), err)
	}
	prefix := Prefix()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		DeletePrefix(ctx, c, prefix)
		_ = c.Close()
	})
	return c, prefix
}

// Prefix returns a random key prefix "bfftest:<hex>:".
func Prefix() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "bfftest:" + hex.EncodeToString(b[:]) + ":"
}

// Keys returns every key under prefix. On a Cluster it scans every master:
// a SCAN sent through a cluster client reaches one node only.
func Keys(ctx context.Context, c redis.UniversalClient, prefix string) []string {
	scan := func(ctx context.Context, c redis.Cmdable) []string {
		var out []string
		iter := c.Scan(ctx, 0, prefix+"*", 1000).Iterator()
		for iter.Next(ctx) {
			out = append(out, iter.Val())
		}
		return out
	}
	cc, ok := c.(*redis.ClusterClient)
	if !ok {
		return scan(ctx, c)
	}
	var (
		mu  sync.Mutex
		out []string
	)
	_ = cc.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
		keys := scan(ctx, node)
		mu.Lock()
		out = append(out, keys...)
		mu.Unlock()
		return nil
	})
	return out
}

// FlushAll deletes every key of c's servers (every master of a Cluster).
// It is for servers a test started itself, never for the shared test Redis.
func FlushAll(ctx context.Context, c redis.UniversalClient) error {
	if cc, ok := c.(*redis.ClusterClient); ok {
		return cc.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
			return node.FlushAll(ctx).Err()
		})
	}
	return c.FlushAll(ctx).Err()
}

// DeletePrefix deletes every key under prefix.
func DeletePrefix(ctx context.Context, c redis.UniversalClient, prefix string) {
	for _, k := range Keys(ctx, c, prefix) {
		c.Del(ctx, k)
	}
}
