//go:build integration

package ledger_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/fintech-bff/bff/internal/ledger"
	"github.com/fintech-bff/bff/internal/testing/pgtest"
)

// safe is a server that keeps every acknowledged commit across a failover.
func safe() ledger.Durability {
	return ledger.Durability{
		Fsync: true, FullPageWrites: true, SynchronousCommit: "on", SynchronousStandbyNames: "FIRST 1 (standby)",
		Standbys: []ledger.Standby{{Name: "standby", State: "streaming", SyncState: "sync"}},
	}
}

// brief is f as "severity setting" strings, sorted.
func brief(f []ledger.Finding) []string {
	var out []string
	for _, x := range f {
		out = append(out, x.Severity.String()+" "+x.Setting)
	}
	slices.Sort(out)
	return out
}

func TestDurabilityFindings(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(d *ledger.Durability)
		want   []string // without ledger.require_synchronous_replication
		strict []string // with it
	}{
		{name: "synchronous standby", change: func(*ledger.Durability) {}},
		{name: "remote_apply", change: func(d *ledger.Durability) { d.SynchronousCommit = "remote_apply" }},
		{name: "quorum", change: func(d *ledger.Durability) {
			d.SynchronousStandbyNames = "ANY 1 (a, b)"
			d.Standbys = []ledger.Standby{{Name: "a", SyncState: "quorum"}, {Name: "b", SyncState: "quorum"}}
		}},
		{name: "fsync off", change: func(d *ledger.Durability) { d.Fsync = false },
			want: []string{"refused fsync"}, strict: []string{"refused fsync"}},
		{name: "synchronous_commit off", change: func(d *ledger.Durability) { d.SynchronousCommit = "off" },
			// off waits for no standby either: refused without the key too.
			want:   []string{"refused synchronous_commit"},
			strict: []string{"refused synchronous_commit"}},
		{name: "synchronous_commit local with a synchronous standby", change: func(d *ledger.Durability) { d.SynchronousCommit = "local" },
			want: []string{"warning synchronous_commit"}, strict: []string{"refused synchronous_commit"}},
		{name: "remote_write", change: func(d *ledger.Durability) { d.SynchronousCommit = "remote_write" },
			want: []string{"warning synchronous_commit"}, strict: []string{"warning synchronous_commit"}},
		{name: "full_page_writes off", change: func(d *ledger.Durability) { d.FullPageWrites = false },
			want: []string{"warning full_page_writes"}, strict: []string{"warning full_page_writes"}},
		{name: "a standby", change: func(d *ledger.Durability) { d.InRecovery = true; d.Standbys = nil },
			want: []string{"refused replication"}, strict: []string{"refused replication"}},
		{name: "asynchronous standby", change: func(d *ledger.Durability) {
			d.SynchronousStandbyNames = ""
			d.Standbys[0].SyncState = "async"
		}, want: []string{"warning replication"}, strict: []string{"refused replication"}},
		{name: "a synchronous and an asynchronous standby", change: func(d *ledger.Durability) {
			d.Standbys = append(d.Standbys, ledger.Standby{Name: "far", SyncState: "async"})
		}, want: []string{"warning replication"}, strict: []string{"warning replication"}},
		{name: "synchronous standby named, none connected", change: func(d *ledger.Durability) { d.Standbys = nil },
			want: []string{"warning synchronous_standby_names"}, strict: []string{"refused synchronous_standby_names"}},
		{name: "standbys the role may not see", change: func(d *ledger.Durability) { d.Standbys[0].SyncState, d.Standbys[0].State = "", "" },
			want: []string{"warning replication"}, strict: []string{"refused replication"}},
		{name: "no standby", change: func(d *ledger.Durability) { d.SynchronousStandbyNames = ""; d.Standbys = nil },
			want: []string{"warning replication"}, strict: []string{"refused replication"}},
		{name: "no standby, synchronous_commit local", change: func(d *ledger.Durability) {
			d.SynchronousStandbyNames, d.SynchronousCommit, d.Standbys = "", "local", nil
		}, want: []string{"warning replication"}, strict: []string{"refused replication"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := safe()
			tc.change(&d)
			if got := brief(d.Findings(false)); !slices.Equal(got, tc.want) {
				t.Errorf("findings %v, want %v", d.Findings(false), tc.want)
			}
			if got := brief(d.Findings(true)); !slices.Equal(got, tc.strict) {
				t.Errorf("findings under require_synchronous_replication %v, want %v", d.Findings(true), tc.strict)
			}
		})
	}
}

// TestDurabilityOnTheMachinesServer reads the test server (a lone one: no
// standby streams from it) as the production start does: a warning that
// the operator must confirm what it cannot show, and a refusal under
// ledger.require_synchronous_replication whose message names no URL.
func TestDurabilityOnTheMachinesServer(t *testing.T) {
	url := pgtest.Database(t)
	l := openPostgres(t, url, key32())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	d, err := l.Durability(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	var fsync, fpw, sc, names string
	var recovery bool
	var standbys int
	if err := c.QueryRow(ctx, `SELECT current_setting('fsync'), current_setting('full_page_writes'), current_setting('synchronous_commit'),
  current_setting('synchronous_standby_names'), pg_is_in_recovery(), (SELECT count(*) FROM pg_stat_replication)`).Scan(
		&fsync, &fpw, &sc, &names, &recovery, &standbys); err != nil {
		t.Fatal(err)
	}
	want := ledger.Durability{Fsync: fsync == "on", FullPageWrites: fpw == "on", SynchronousCommit: sc, SynchronousStandbyNames: names, InRecovery: recovery}
	if fmt.Sprint(d.Fsync, d.FullPageWrites, d.SynchronousCommit, d.SynchronousStandbyNames, d.InRecovery, len(d.Standbys)) !=
		fmt.Sprint(want.Fsync, want.FullPageWrites, want.SynchronousCommit, want.SynchronousStandbyNames, want.InRecovery, standbys) {
		t.Fatalf("Durability %+v; the server says %+v with %d standbys", d, want, standbys)
	}
	if standbys != 0 || names != "" || !d.Fsync || sc == "off" {
		t.Fatalf("the test server is expected alone, with fsync and synchronous_commit on: %+v", d)
	}
	if got := brief(d.Findings(false)); !slices.Equal(got, []string{"warning replication"}) {
		t.Errorf("findings %v", d.Findings(false))
	}

	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	if err := l.CheckDurability(ctx, false, log); err != nil {
		t.Errorf("CheckDurability without the key: %v", err)
	}
	if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "no standby streams") {
		t.Errorf("no warning about the missing standby: %s", logs.String())
	}
	err = l.CheckDurability(ctx, true, log)
	if err == nil || !strings.Contains(err.Error(), "ledger.require_synchronous_replication is true") ||
		!strings.Contains(err.Error(), "replication: no standby streams") {
		t.Errorf("CheckDurability under the key: %v", err)
	}
	if err != nil && (strings.Contains(err.Error(), "127.0.0.1") || strings.Contains(err.Error(), "postgres://")) {
		t.Errorf("the refusal names the URL: %v", err)
	}
	t.Logf("the test server: %+v; CheckDurability under the key: %v", d, err)
}
