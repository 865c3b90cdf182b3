package metrics

import (
	"log/slog"
	"sync/atomic"

	"github.com/fintech-bff/bff/internal/limits"
)

// Budgets is the request budgets' limits.Observer. Their one event has no
// metric: the first failed exchange with the other instances is a warning,
// the others are not logged (a Redis outage is bff_store_up; a command the
// store refuses fails the first exchange already). Safe for concurrent use.
type Budgets struct {
	log    *slog.Logger
	warned atomic.Bool
}

var _ limits.Observer = (*Budgets)(nil)

// NewBudgets returns the request budgets' observer, which warns on log.
func NewBudgets(log *slog.Logger) *Budgets { return &Budgets{log: log} }

// ExchangeFailed implements limits.Observer.
func (b *Budgets) ExchangeFailed(err error) {
	if b.warned.CompareAndSwap(false, true) {
		b.log.Warn("the request budgets could not be exchanged with the other instances", slog.String("error", err.Error()))
	}
}
