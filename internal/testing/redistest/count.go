package redistest

import (
	"context"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// CountCommands counts, from now on, the commands rc sends (each of a
// pipeline's), for the benchmarks that report Redis commands per request.
func CountCommands(rc redis.UniversalClient) *atomic.Int64 {
	n := new(atomic.Int64)
	rc.AddHook(countHook{n: n})
	return n
}

// CountRoundTrips counts, from now on, the round trips rc makes: a
// command sent alone, or a pipeline.
func CountRoundTrips(rc redis.UniversalClient) *atomic.Int64 {
	n := new(atomic.Int64)
	rc.AddHook(countHook{n: n, trips: true})
	return n
}

type countHook struct {
	n     *atomic.Int64
	trips bool // a pipeline counts once
}

func (h countHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h countHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmd)
	}
}

func (h countHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if h.trips {
			h.n.Add(1)
		} else {
			h.n.Add(int64(len(cmds)))
		}
		return next(ctx, cmds)
	}
}
