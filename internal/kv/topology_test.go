//go:build integration

package kv_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fintech-bff/bff/internal/kv"
	"github.com/fintech-bff/bff/internal/testing/redistest"
)

func suiteOnPrefixes(t *testing.T, c redis.UniversalClient) {
	redistest.OnFlushedPrefixes(t, c, func(t *testing.T, prefix string) {
		suite(t, kv.NewRedis(c, prefix))
	})
}

func TestRedisCluster(t *testing.T) {
	t.Parallel()
	cl := redistest.StartCluster(t, 3)
	c := cl.UniversalClient(t)
	suiteOnPrefixes(t, c)
	t.Run("keys spread over the masters", func(t *testing.T) {
		ctx := context.Background()
		r := kv.NewRedis(c, "bff:")
		for i := range 30 {
			if err := r.Set(ctx, fmt.Sprintf("spread-%d", i), []byte("x"), time.Minute); err != nil {
				t.Fatal(err)
			}
		}
		used := 0
		for _, n := range cl.Nodes {
			nc := n.Client()
			if nc.DBSize(ctx).Val() > 0 {
				used++
			}
			_ = nc.Close()
		}
		if used != len(cl.Nodes) {
			t.Fatalf("got keys on %d of %d masters, want every master (the suite ran on one node only)", used, len(cl.Nodes))
		}
	})
}

func TestRedisSentinel(t *testing.T) {
	t.Parallel()
	s := redistest.StartSentinel(t)
	c := s.UniversalClient(t)
	suiteOnPrefixes(t, c)
}
