package payments_test

import (
	"context"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fintech-bff/bff/internal/limits"
	"github.com/fintech-bff/bff/internal/payments"
)

// events is a payments.Observer that counts what it hears.
type events struct {
	mu       sync.Mutex
	money    map[string]int
	refused  map[string]int
	followed map[string]int
}

func (e *events) MoneyRequest(result payments.MoneyResult) { e.add(&e.money, string(result)) }
func (e *events) Refused(limit limits.Kind)                { e.add(&e.refused, string(limit)) }
func (e *events) Followed(result payments.FollowResult)    { e.add(&e.followed, string(result)) }

func (e *events) add(m *map[string]int, k string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if *m == nil {
		*m = map[string]int{}
	}
	(*m)[k]++
}

func (e *events) get() (money, refused map[string]int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return maps.Clone(e.money), maps.Clone(e.refused)
}

// The observer hears how each money-moving request ended, once each.
func TestObserverHearsHowMoneyRequestsEnd(t *testing.T) {
	f := newMoneyFixture(t, nil)
	f.pay(t, payment, "")                                      // key_required
	f.pay(t, payment, "bad key")                               // key_invalid
	f.pay(t, payment, "k1")                                    // answered
	f.pay(t, payment, "k1")                                    // replayed
	f.pay(t, strings.Replace(payment, "12.50", "13", 1), "k1") // key_reused
	f.bank.refuse.Store(`{"type":"PROVIDER_UNAVAILABLE","message":"the bank is down"}`)
	f.pay(t, payment, "k2") // released
	money, refused := f.events.get()
	want := map[string]int{"key_required": 1, "key_invalid": 1, "answered": 1, "replayed": 1, "key_reused": 1, "released": 1}
	if !maps.Equal(money, want) || len(refused) != 0 {
		t.Fatalf("got %v and refusals %v, want %v and none", money, refused, want)
	}

	down := newMoneyFixture(t, failingLedger{})
	down.pay(t, payment, "k3")
	if money, _ := down.events.get(); !maps.Equal(money, map[string]int{"ledger_unavailable": 1}) {
		t.Fatalf("ledger down: got %v, want ledger_unavailable once", money)
	}
}

// The observer hears of each refresh the credit guard refused, as the
// limit "refresh", and of no other.
func TestObserverHearsOfRefusedRefreshes(t *testing.T) {
	ctx := context.Background()
	f := newRefreshFixture(t)
	f.refresh(t, ctx, "alice", payments.RefreshPath)
	f.advance(time.Minute)
	f.refresh(t, ctx, "alice", payments.RefreshPath)
	f.refresh(t, ctx, "alice", payments.RefreshPath)
	f.refresh(t, ctx, "bob", payments.RefreshPath)
	if _, refused := f.events.get(); !maps.Equal(refused, map[string]int{"refresh": 2}) {
		t.Fatalf("got refusals %v, want refresh twice", refused)
	}
}
