//go:build integration

package redistest_test

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fintech-bff/bff/internal/testing/poll"
	"github.com/fintech-bff/bff/internal/testing/redistest"
)

// alive reports whether a process with this id exists.
func alive(pid int) bool { return syscall.Kill(pid, 0) == nil }

// The servers a test starts answer while it runs and are gone (killed and
// reaped) once it ends.
func TestServersAreKilledWhenTheTestEnds(t *testing.T) {
	var pids []int
	t.Run("cluster", func(t *testing.T) {
		c := redistest.StartCluster(t, 3)
		rc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs()})
		defer rc.Close()
		ctx := context.Background()
		for _, k := range []string{"a", "b", "c", "d", "e", "f"} { // spread over slots
			if err := rc.Set(ctx, "bff:"+k, k, time.Minute).Err(); err != nil {
				t.Fatal(err)
			}
		}
		if got := redistest.Keys(ctx, rc, "bff:"); len(got) != 6 {
			t.Fatalf("Keys on the cluster: got %v, want 6 keys from every master", got)
		}
		if err := redistest.FlushAll(ctx, rc); err != nil {
			t.Fatal(err)
		}
		if got := redistest.Keys(ctx, rc, "bff:"); len(got) != 0 {
			t.Fatalf("after FlushAll: got %v, want none", got)
		}
		for _, n := range c.Nodes {
			pids = append(pids, n.Pid())
		}
	})
	t.Run("sentinel", func(t *testing.T) {
		s := redistest.StartSentinel(t)
		fc := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: s.MasterName, SentinelAddrs: s.SentinelAddrs()})
		defer fc.Close()
		if err := fc.Ping(context.Background()).Err(); err != nil {
			t.Fatal(err)
		}
		s.WaitReplicated(t)
		s.KillMaster(t)
		took := s.WaitFailover(t)
		t.Logf("the Sentinel promoted the replica %v after the master was killed", took)
		var err error
		if !poll.Within(10*time.Second, func() bool {
			err = fc.Set(context.Background(), "after", "1", time.Minute).Err()
			return err == nil
		}) {
			t.Fatalf("write after the failover: %v\n%s", err, s.Logs())
		}
		for _, n := range s.Servers() {
			pids = append(pids, n.Pid())
		}
	})
	if len(pids) != 6 {
		t.Fatalf("got %d server pids, want 6", len(pids))
	}
	for _, pid := range pids {
		if alive(pid) {
			t.Errorf("redis-server pid %d is still running after its test ended", pid)
		}
	}
}
