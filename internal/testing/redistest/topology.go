package redistest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fintech-bff/bff/internal/kv"
)

// Prefixes are the key prefixes topology suites run under: the default and
// none. Neither has a hash tag, so on a Cluster keys spread over the slots
// of every master (a "{bff}:" prefix would pin them to one slot and hide
// cross-slot mistakes); token keys' own tag picks their slot.
var Prefixes = []string{"bff:", ""}

// OnFlushedPrefixes runs suite once per prefix of Prefixes, each as a
// subtest on servers flushed just before it (these servers are the test's
// own, so flushing touches nobody else's keys).
func OnFlushedPrefixes(t *testing.T, c redis.UniversalClient, suite func(t *testing.T, prefix string)) {
	for _, prefix := range Prefixes {
		t.Run(fmt.Sprintf("prefix %q", prefix), func(t *testing.T) {
			if err := FlushAll(context.Background(), c); err != nil {
				t.Fatal(err)
			}
			suite(t, prefix)
		})
	}
}

// UniversalClient is a client to the Cluster built the way the BFF builds
// it (kv.NewClient), closed when t ends.
func (c *Cluster) UniversalClient(t testing.TB) redis.UniversalClient {
	return universal(t, kv.ClientOptions{ClusterAddrs: c.Addrs()})
}

// UniversalClient is a client through the Sentinel built the way the BFF
// builds it (kv.NewClient), closed when t ends.
func (s *Sentinel) UniversalClient(t testing.TB) redis.UniversalClient {
	return universal(t, kv.ClientOptions{SentinelMaster: s.MasterName, SentinelAddrs: s.SentinelAddrs()})
}

func universal(t testing.TB, o kv.ClientOptions) redis.UniversalClient {
	t.Helper()
	o.DialTimeout, o.ReadTimeout, o.WriteTimeout = 2*time.Second, 2*time.Second, 2*time.Second
	c, err := kv.NewClient(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}
