package edge

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/fintech-bff/bff/internal/testing/syncbuf"
	"github.com/fintech-bff/bff/internal/testing/testclock"
)

// One line per interval, whatever the flood; the next line counts those
// left out.
func TestSparseLog(t *testing.T) {
	var buf syncbuf.Buffer
	clock := testclock.New(time.Unix(1_700_000_000, 0))
	s := newSparseLog(slog.New(slog.NewJSONHandler(&buf, nil)), slog.LevelWarn, "refused", 10*time.Second)
	s.now = clock.Now
	ctx := context.Background()
	for range 500 {
		s.write(ctx, slog.String("reason", "forged"))
	}
	clock.Advance(10 * time.Second)
	s.write(ctx, slog.String("reason", "forged"))
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("got %d lines for 501 writes over 10 s, want 2:\n%s", len(lines), buf.String())
	}
	var second map[string]any
	if err := json.Unmarshal([]byte(lines[1]), &second); err != nil {
		t.Fatal(err)
	}
	if second["omittedSinceLastLine"] != float64(499) || second["level"] != "WARN" {
		t.Fatalf("the second line: %v, want omittedSinceLastLine 499 at WARN", second)
	}
}
