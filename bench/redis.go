package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// benchRedis is the Redis the BFFs use during the run.
type benchRedis struct {
	addr    string
	desc    string // for the report
	private bool   // started by the harness (stopped with the other processes)
	client  *redis.Client
}

// startRedis starts a private redis-server on a free port when the binary
// is installed (its INFO commandstats then counts the BFF's commands only),
// else uses BFF_TEST_REDIS_ADDR or 127.0.0.1:6379.
func startRedis(ps *procSet, dir string) (*benchRedis, error) {
	if path, err := exec.LookPath("redis-server"); err == nil {
		addr, err := freeAddr()
		if err != nil {
			return nil, err
		}
		_, port, _ := strings.Cut(addr, ":")
		p, err := ps.start("redis-server", filepath.Join(dir, "redis.log"), path,
			"--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir)
		if err != nil {
			return nil, err
		}
		r := newBenchRedis(addr, "private redis-server on "+addr+" (only the BFFs talk to it)")
		r.private = true
		if err := waitReady(p, 5*time.Second, r.ping); err != nil {
			return nil, err
		}
		return r, nil
	}
	addr := os.Getenv("BFF_TEST_REDIS_ADDR")
	if addr == "" {
		addr = "127.0.0.1:6379"
	}
	r := newBenchRedis(addr, "shared Redis at "+addr+" (commandstats may include other clients)")
	if err := r.ping(); err != nil {
		return nil, fmt.Errorf("no redis-server installed and none answers at %s: %w", addr, err)
	}
	return r, nil
}

func newBenchRedis(addr, desc string) *benchRedis {
	return &benchRedis{addr: addr, desc: desc, client: redis.NewClient(&redis.Options{Addr: addr})}
}

func (r *benchRedis) ping() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	return r.client.Ping(ctx).Err()
}

// commandCalls is the sum of calls= over INFO commandstats, and the calls
// by command.
func (r *benchRedis) commandCalls() (int64, map[string]int64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	info, err := r.client.Info(ctx, "commandstats").Result()
	if err != nil {
		return 0, nil, err
	}
	total, by := sumCalls(info)
	return total, by, nil
}

func sumCalls(info string) (int64, map[string]int64) {
	var total int64
	by := map[string]int64{}
	for line := range strings.Lines(info) {
		name, ok := strings.CutPrefix(line, "cmdstat_")
		if !ok {
			continue
		}
		name, _, _ = strings.Cut(name, ":")
		_, rest, ok := strings.Cut(line, "calls=")
		if !ok {
			continue
		}
		num, _, _ := strings.Cut(rest, ",")
		n, err := strconv.ParseInt(strings.TrimSpace(num), 10, 64)
		if err == nil {
			total += n
			by[name] = n
		}
	}
	return total, by
}

// dropPrefix deletes the run's keys from a shared Redis.
func (r *benchRedis) dropPrefix(prefix string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	iter := r.client.Scan(ctx, 0, prefix+"*", 1000).Iterator()
	batch := make([]string, 0, 1000)
	for iter.Next(ctx) {
		batch = append(batch, iter.Val())
		if len(batch) == cap(batch) {
			r.client.Unlink(ctx, batch...)
			batch = batch[:0]
		}
	}
	if len(batch) > 0 {
		r.client.Unlink(ctx, batch...)
	}
}
