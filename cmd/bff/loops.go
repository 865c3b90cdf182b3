package main

import (
	"context"
	"log/slog"

	"golang.org/x/sync/errgroup"
)

// loops owns every background loop of the process: each starts through it,
// and stop cancels them all and waits for each one to return, so no loop
// is mid-query when the stores it uses close (release closes them after
// stop).
type loops struct {
	ctx    context.Context
	cancel context.CancelFunc
	group  errgroup.Group
	log    *slog.Logger
}

func newLoops(log *slog.Logger) *loops {
	ctx, cancel := context.WithCancel(context.Background())
	return &loops{ctx: ctx, cancel: cancel, log: log}
}

// run starts f, which runs until its context ends.
func (l *loops) run(f func(ctx context.Context)) {
	l.group.Go(func() error {
		f(l.ctx)
		return nil
	})
}

// runErr starts f; an error it returns before the loops are stopped is
// logged, naming the loop: the process goes on without it, and says so.
func (l *loops) runErr(name string, f func(ctx context.Context) error) {
	l.group.Go(func() error {
		if err := f(l.ctx); err != nil && l.ctx.Err() == nil {
			l.log.Error("a background loop stopped with an error; this instance goes on without it", slog.String("loop", name), slog.String("error", err.Error()))
		}
		return nil
	})
}

// stop cancels every loop and waits for each to return.
func (l *loops) stop() {
	l.cancel()
	_ = l.group.Wait()
}
