package ledger

import (
	"context"

	"github.com/jackc/pgx/v5/pgxpool"
)

// GateShut reports whether the ledger refuses new claims without asking
// the database (see gate).
func (p *Postgres) GateShut() bool { return !p.gate.open() }

// Taken is how many connections the three pools count as taken (acquired,
// or being made).
func (p *Postgres) Taken() (n int32) {
	for _, pool := range []*pgxpool.Pool{p.pool, p.claims, p.bg} {
		s := pool.Stat()
		n += s.AcquiredConns() + s.ConstructingConns()
	}
	return n
}

// Dialled is how many connections the ledger has dialled (cancel requests
// and the gate's probes included).
func (p *Postgres) Dialled() int64 { return p.gate.dialled.Load() }

// Probe runs the gate's probe once.
func (p *Postgres) Probe(ctx context.Context) error {
	return p.gate.probe(context.WithValue(ctx, probing{}, true))
}
