package session_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/fintech-bff/bff/internal/kv"
	"github.com/fintech-bff/bff/internal/session"
)

// A session record that cannot be read is not found, as before, but
// logged: a change of the record's schema would otherwise look like users
// logged out en masse. The line carries no value of the record, nor the
// session id.
func TestUnreadableRecordIsNotFoundAndLogged(t *testing.T) {
	ctx := context.Background()
	var log bytes.Buffer
	store := kv.NewMemory(nil)
	m := session.NewManager(store, session.Options{IdleTimeout: time.Hour, AbsoluteTimeout: 2 * time.Hour,
		Logger: slog.New(slog.NewJSONHandler(&log, nil))})
	for _, tc := range []struct{ name, record string }{
		{"not JSON", "not-json-secret-value"},
		{"a field of another type", `{"u":"alice","c":"secret-value-in-a-time"}`},
		{"no user id", `{"m":"dev"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			log.Reset()
			id := session.NewID()
			if err := store.Set(ctx, "sess:"+session.Handle(id), []byte(tc.record), time.Minute); err != nil {
				t.Fatal(err)
			}
			if _, err := m.Lookup(ctx, id); !errors.Is(err, session.ErrNotFound) {
				t.Fatalf("got %v, want ErrNotFound", err)
			}
			line := log.String()
			if !strings.Contains(line, "a session record could not be read") {
				t.Fatalf("got log %q, want the unreadable record logged", line)
			}
			for _, secret := range []string{"secret-value", id, session.Handle(id)} {
				if strings.Contains(line, secret) {
					t.Fatalf("the log line %q holds %q", line, secret)
				}
			}
		})
	}
}

// failingIndexReads is an in-process store whose set reads fail: a login's
// housekeeping (trim) cannot run.
type failingIndexReads struct{ *kv.Memory }

func (failingIndexReads) SMembers(context.Context, string) ([]string, error) {
	return nil, kv.ErrUnavailable
}

// A login whose housekeeping fails still succeeds, and the failure is
// logged, not dropped silently.
func TestCreateLogsItsHousekeepingError(t *testing.T) {
	var log bytes.Buffer
	m := session.NewManager(failingIndexReads{kv.NewMemory(nil)}, session.Options{IdleTimeout: time.Hour, AbsoluteTimeout: 2 * time.Hour,
		Logger: slog.New(slog.NewJSONHandler(&log, nil))})
	if _, _, err := m.Create(context.Background(), session.New{UserID: "alice", Method: session.MethodDev}); err != nil {
		t.Fatalf("got %v, want the session created", err)
	}
	if !strings.Contains(log.String(), "pruning the user's sessions after a login failed") {
		t.Fatalf("got log %q, want the housekeeping's failure logged", log.String())
	}
}
