package ledger

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/jackc/pgx/v5"
)

// The ledger's claim is the only thing that stops a second payment: a
// committed claim the database later loses is a key that can run again.
// So the database must keep every commit it acknowledged, across a crash
// and across a failover. docs/ledger-database.md says what that takes;
// Durability reads what of it the server shows, and Findings judges it.

// Durability is what the ledger's server says about keeping commits.
type Durability struct {
	// Settings as the ledger's own sessions see them (a role or database
	// may override the server's): fsync, full_page_writes,
	// synchronous_commit and synchronous_standby_names.
	Fsync                   bool
	FullPageWrites          bool
	SynchronousCommit       string
	SynchronousStandbyNames string
	// InRecovery: this server is a standby (read-only).
	InRecovery bool
	// Standbys are pg_stat_replication's rows: the servers streaming from
	// this one.
	Standbys []Standby
}

// Standby is one server streaming from the ledger's.
type Standby struct {
	Name string // application_name
	// State (streaming, catchup, …) and SyncState (sync, quorum, potential,
	// async) are empty when the ledger's role may not see them: only
	// superusers and members of pg_read_all_stats (pg_monitor) do.
	State     string
	SyncState string
}

// Durability reads the server's durability settings and its standbys.
func (p *Postgres) Durability(ctx context.Context) (Durability, error) {
	var d Durability
	var fsync, fpw string
	err := p.pool.QueryRow(ctx, `
SELECT current_setting('fsync'), current_setting('full_page_writes'), current_setting('synchronous_commit'),
       current_setting('synchronous_standby_names'), pg_is_in_recovery()`).Scan(
		&fsync, &fpw, &d.SynchronousCommit, &d.SynchronousStandbyNames, &d.InRecovery)
	if err != nil {
		return d, unavailable(err)
	}
	d.Fsync, d.FullPageWrites = fsync == "on", fpw == "on"
	rows, err := p.pool.Query(ctx, `
SELECT coalesce(application_name, ''), coalesce(state, ''), coalesce(sync_state, '')
FROM pg_stat_replication ORDER BY application_name`)
	if err != nil {
		return d, unavailable(err)
	}
	d.Standbys, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (Standby, error) {
		var s Standby
		err := r.Scan(&s.Name, &s.State, &s.SyncState)
		return s, err
	})
	return d, unavailable(err)
}

// Severity is how much a finding matters at a production start.
type Severity int

const (
	// Warn: the BFF starts and logs it; what the server does not show the
	// operator must confirm (docs/ledger-database.md).
	Warn Severity = iota + 1
	// Refuse: the BFF does not start.
	Refuse
)

func (s Severity) String() string {
	switch s {
	case Warn:
		return "warning"
	case Refuse:
		return "refused"
	}
	return fmt.Sprintf("Severity(%d)", int(s))
}

// Finding is one thing wrong, or not provably right, with the ledger's
// database.
type Finding struct {
	Severity Severity
	Setting  string // what it is about: a setting's name, or "replication"
	Message  string
}

func (f Finding) String() string { return f.Setting + ": " + f.Message }

// synchronous reports whether the standby confirms commits before they
// return (sync_state sync, or quorum: one of a quorum).
func (s Standby) synchronous() bool { return s.SyncState == "sync" || s.SyncState == "quorum" }

// Findings judges d for production. requireSync (the configuration's
// ledger.require_synchronous_replication) turns the findings about
// replication into refusals: the BFF then starts only on a server that
// shows a synchronous standby its commits wait for.
//
// Refused whatever requireSync says, because they lose acknowledged
// commits without any failover: fsync off (a crash of the server's machine
// loses, or corrupts, what was committed), synchronous_commit off (a crash
// of PostgreSQL loses the last commits), and a server in recovery (a
// standby: the ledger cannot write there).
//
// Warned about (refused under requireSync), because a failover can lose
// acknowledged commits: standbys that all stream asynchronously; a
// synchronous standby that commits do not wait for (synchronous_commit
// local); and no standby in sight, which is either a lone server (its lost
// disk loses the ledger) or a managed service that replicates out of
// sight, whose operator must confirm a failover loses no commit.
//
// Warned about only: full_page_writes off (safe only on storage that
// writes a page atomically), synchronous_commit remote_write (a commit is
// in the standby's memory, not yet on its disk), a synchronous standby
// named but none connected (commits wait until one is: unavailable, not
// lost), and standbys whose replication state the ledger's role may not
// read.
func (d Durability) Findings(requireSync bool) []Finding {
	var out []Finding
	add := func(sev Severity, setting, format string, args ...any) {
		out = append(out, Finding{Severity: sev, Setting: setting, Message: fmt.Sprintf(format, args...)})
	}
	replication := Warn
	if requireSync {
		replication = Refuse
	}
	if !d.Fsync {
		add(Refuse, "fsync", "off: a crash of the database's machine loses committed claims (or corrupts the database), and a lost claim lets its payment run again")
	}
	if !d.FullPageWrites {
		add(Warn, "full_page_writes", "off: after an operating-system crash a torn page can corrupt the ledger, unless the storage writes pages atomically (confirm that it does)")
	}
	if d.InRecovery {
		add(Refuse, "replication", "the server is a standby (in recovery) and cannot record claims: point the URL at the primary, or list every host with target_session_attrs=read-write")
	}
	sc := d.SynchronousCommit
	if sc == "off" {
		add(Refuse, "synchronous_commit", "off: a commit returns before it is on disk, so a crash of PostgreSQL loses the last claims, and a lost claim lets its payment run again")
	}
	var sync, async, hidden []string
	for _, s := range d.Standbys {
		name := s.Name
		if name == "" {
			name = "(unnamed)"
		}
		switch {
		case s.SyncState == "":
			hidden = append(hidden, name)
		case s.synchronous():
			sync = append(sync, name)
		default:
			async = append(async, name)
		}
	}
	named := strings.TrimSpace(d.SynchronousStandbyNames) != ""
	switch {
	case d.InRecovery:
		// Refused above; what it replicates to does not matter.
	case len(hidden) > 0:
		add(replication, "replication", "%d standby(s) stream from the server (%s) and the ledger's role may not read whether they are synchronous: "+
			"grant it pg_monitor, or confirm that a failover promotes only a synchronous standby", len(hidden), strings.Join(hidden, ", "))
	case len(sync) > 0 && sc == "local":
		add(replication, "synchronous_commit", "local: commits do not wait for the synchronous standby (%s), so a failover to it can lose committed claims: "+
			"set synchronous_commit to on or remote_apply for the ledger's role or database", strings.Join(sync, ", "))
	case len(sync) > 0:
		if sc == "remote_write" {
			add(Warn, "synchronous_commit", "remote_write: a commit is in the standby's memory, not yet on its disk, when it returns; "+
				"a crash of the standby together with the primary loses it (on or remote_apply do not)")
		}
		if len(async) > 0 {
			add(Warn, "replication", "standby(s) %s stream asynchronously: a failover must promote only a synchronous one (%s), or it can lose committed claims",
				strings.Join(async, ", "), strings.Join(sync, ", "))
		}
	case named:
		add(replication, "synchronous_standby_names", "names a synchronous standby (%q) and none is connected: "+
			"commits wait until one is (claims fail meanwhile), and standbys now streaming (%d) are asynchronous",
			d.SynchronousStandbyNames, len(async))
	case len(async) > 0:
		add(replication, "replication", "standby(s) %s stream asynchronously: a failover to one loses the claims it had not received, "+
			"and each lost claim lets its payment run a second time; make one synchronous (synchronous_standby_names, synchronous_commit on)",
			strings.Join(async, ", "))
	default:
		add(replication, "replication", "no standby streams from this server: a lone server loses the ledger with its disk, and a restored backup the claims since; "+
			"a managed service may replicate out of sight: confirm that its failover loses no committed transaction (synchronous replication)")
	}
	return out
}

// Refusals are f's findings of severity Refuse.
func Refusals(f []Finding) []Finding {
	var out []Finding
	for _, x := range f {
		if x.Severity == Refuse {
			out = append(out, x)
		}
	}
	return out
}

// CheckDurability is the production start's check: it reads Durability,
// logs each warning, and returns an error naming every refusal.
// requireSync is ledger.require_synchronous_replication. Neither names the
// URL.
func (p *Postgres) CheckDurability(ctx context.Context, requireSync bool, log *slog.Logger) error {
	d, err := p.Durability(ctx)
	if err != nil {
		return fmt.Errorf("reading the database's durability settings: %w", err)
	}
	findings := d.Findings(requireSync)
	for _, f := range findings {
		if f.Severity == Warn {
			log.Warn("the payments ledger's database may lose committed claims, and a lost claim lets its payment run twice: "+f.String(),
				slog.String("see", "docs/ledger-database.md"))
		}
	}
	refused := Refusals(findings)
	if len(refused) == 0 {
		return nil
	}
	msgs := make([]string, len(refused))
	for i, f := range refused {
		msgs[i] = f.String()
	}
	return fmt.Errorf("the database does not keep every committed claim, and a lost claim lets its payment run twice "+
		"(docs/ledger-database.md; ledger.require_synchronous_replication is %t): %s", requireSync, strings.Join(msgs, "; "))
}
