package edge

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// sparseLog writes at most one line per interval for a message that
// anyone can cause (a forged back-channel logout token, a scanner's
// static misses); the lines left
// out are counted in the next one written, so none goes unnoticed and a
// flood costs one line per interval.
type sparseLog struct {
	log      *slog.Logger
	level    slog.Level
	msg      string
	interval time.Duration
	now      func() time.Time

	mu      sync.Mutex
	last    time.Time
	omitted int
}

func newSparseLog(log *slog.Logger, level slog.Level, msg string, interval time.Duration) *sparseLog {
	return &sparseLog{log: log, level: level, msg: msg, interval: interval, now: time.Now}
}

// write writes the line with attrs, or counts it when one was written
// less than an interval ago.
func (s *sparseLog) write(ctx context.Context, attrs ...slog.Attr) {
	s.mu.Lock()
	now := s.now()
	if !s.last.IsZero() && now.Sub(s.last) < s.interval {
		s.omitted++
		s.mu.Unlock()
		return
	}
	omitted := s.omitted
	s.last, s.omitted = now, 0
	s.mu.Unlock()
	if omitted > 0 {
		attrs = append(attrs, slog.Int("omittedSinceLastLine", omitted))
	}
	s.log.LogAttrs(ctx, s.level, s.msg, attrs...)
}
