//go:build integration

package dpop

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/redis/go-redis/v9"

	"github.com/fintech-bff/bff/internal/kv"
	"github.com/fintech-bff/bff/internal/testing/redistest"
)

// BenchmarkReplayRedis is the jti claim on a real Redis through the kv
// store every instance shares: one round trip, and the commands it sends
// per proof (cmds/op).
func BenchmarkReplayRedis(b *testing.B) {
	rc, prefix := redistest.Client(b)
	cmds := redistest.CountCommands(rc)
	store := kv.NewRedis(rc, prefix)
	cmds.Store(0)
	benchmarkReplay(b, store)
	b.StopTimer()
	b.ReportMetric(float64(cmds.Load())/float64(b.N), "cmds/op")
}

// A jti claimed on one instance is a replay on another sharing the store
// (the real Redis: the kv store's SetNX is what every instance calls).
func TestReplayRefusedAcrossStoreClients(t *testing.T) {
	rc, prefix := redistest.Client(t)
	other := redis.NewClient(&redis.Options{Addr: redistest.Addr()})
	defer other.Close()
	a, err := NewVerifier(Options{Now: func() time.Time { return t0 }, Replay: kv.NewRedis(rc, prefix)})
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewVerifier(Options{Now: func() time.Time { return t0 }, Replay: kv.NewRedis(other, prefix)})
	if err != nil {
		t.Fatal(err)
	}
	check := Check{Method: "POST", URL: testURL, Token: testTok, JKT: jktOf(t, p256Key.Public())}
	p := proofOf(t, p256Key, jose.ES256, good())
	if _, err := a.Verify(context.Background(), p, check); err != nil {
		t.Fatalf("on the first: got %v, want nil", err)
	}
	if _, err := b.Verify(context.Background(), p, check); ReasonOf(err) != ReasonReplay {
		t.Fatalf("on the second: got %v, want a replay", err)
	}
	keys := redistest.Keys(context.Background(), rc, prefix)
	if len(keys) != 1 || !strings.HasPrefix(keys[0], prefix+"dpop:jti:") {
		t.Fatalf("got keys %q, want one under %sdpop:jti:", keys, prefix)
	}
	ttl, err := rc.PTTL(context.Background(), keys[0]).Result()
	if err != nil || ttl <= DefaultMaxAge+DefaultMaxAhead || ttl > DefaultMaxAge+DefaultMaxAhead+replayMargin {
		t.Fatalf("got ttl %v, %v; want over %v and at most %v", ttl, err, DefaultMaxAge+DefaultMaxAhead, DefaultMaxAge+DefaultMaxAhead+replayMargin)
	}
}
