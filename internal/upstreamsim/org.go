package upstreamsim

import (
	"fmt"
	"sync"
	"time"
)

// Plans the simulator knows. Only "free" changes behaviour: the data and
// payment routes answer 403 NOT_AVAILABLE_ON_PLAN.
const (
	PlanFree    = "free"
	PlanStarter = "starter"
	PlanPro     = "pro"
)

// Refresh constants: the upstream's cost (docs/upstream-sim.md, "On-demand
// refresh"), and how long a
// refresh runs on the simulator clock.
const (
	refreshCost     = 20
	refreshDuration = 60 * time.Second
)

func validPlan(p string) bool { return p == PlanFree || p == PlanStarter || p == PlanPro }

// org is the organization-wide state: plan, sandbox gate, credits, the
// running refresh, connector verification and the connection cap. It is
// safe for concurrent use.
//
// Credits are the organization's, as the upstream's are. A test
// user may be given a balance of its own (userCredits): that user's
// refreshes are charged to it, and its 402 reports it, while every other
// user goes on with the organization's balance. The running refresh stays
// organization-wide.
type org struct {
	mu               sync.Mutex
	plan             string
	productionAccess bool
	credits          int
	userCredits      map[string]int // per-user overrides of credits
	refreshUntil     time.Time
	connectorDown    bool
	apiConnections   int // live connections created through the API
}

// OrgState is a snapshot of the organization settings. UserCredits holds
// the per-user credit balances that override Credits (see
// Server.SetUserCredits); it is nil when there are none.
type OrgState struct {
	Plan             string         `json:"plan"`
	ProductionAccess bool           `json:"productionAccess"`
	Credits          int            `json:"credits"`
	UserCredits      map[string]int `json:"userCredits,omitempty"`
}

func (o *org) state() OrgState {
	o.mu.Lock()
	defer o.mu.Unlock()
	st := OrgState{Plan: o.plan, ProductionAccess: o.productionAccess, Credits: o.credits}
	if len(o.userCredits) > 0 {
		st.UserCredits = make(map[string]int, len(o.userCredits))
		for u, n := range o.userCredits {
			st.UserCredits[u] = n
		}
	}
	return st
}

// setUserCredits gives userID a balance of its own (n, at least 0).
func (o *org) setUserCredits(userID string, n int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.userCredits == nil {
		o.userCredits = map[string]int{}
	}
	o.userCredits[userID] = max(n, 0)
}

// clearUserCredits returns userID to the organization's balance and
// reports whether it had one of its own.
func (o *org) clearUserCredits(userID string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	_, ok := o.userCredits[userID]
	delete(o.userCredits, userID)
	return ok
}

// balance is the credit balance userID's refreshes are charged to: its
// own if it has one, else the organization's. The caller holds o.mu.
func (o *org) balance(userID string) int {
	if n, ok := o.userCredits[userID]; ok {
		return n
	}
	return o.credits
}

// charge takes n credits from userID's balance. The caller holds o.mu.
func (o *org) charge(userID string, n int) {
	if _, ok := o.userCredits[userID]; ok {
		o.userCredits[userID] -= n
		return
	}
	o.credits -= n
}

func (o *org) isFree() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.plan == PlanFree
}

func (o *org) hasProductionAccess() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.productionAccess
}

func (o *org) isConnectorDown() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.connectorDown
}

// reserveConnection counts a new API connection against the cap.
func (o *org) reserveConnection(limit int) *apiError {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.apiConnections >= limit {
		return newError(403, typeAccountLimit,
			"The organization has reached its limit of %d corporate accounts", limit)
	}
	o.apiConnections++
	return nil
}

func (o *org) releaseConnection() {
	o.mu.Lock()
	if o.apiConnections > 0 {
		o.apiConnections--
	}
	o.mu.Unlock()
}

// refreshOutcome is the body of an on-demand refresh reply. Its 402 and 409
// forms carry no type, as the upstream's do (docs/upstream-sim.md).
type refreshOutcome struct {
	httpStatus int
	Status     string `json:"status"`
	Message    string `json:"message"`
	Cost       int    `json:"cost,omitempty"`
	Balance    *int   `json:"balance,omitempty"`
}

// startRefresh runs the refresh rules in order for userID: a refresh
// already running answers already_running (never charged, never a 409); a
// user with no connection able to fetch gets 409; fewer than 20 credits
// (the user's own balance if it has one, else the organization's) gets
// 402; otherwise 20 credits are charged and a refresh runs for
// refreshDuration.
func (o *org) startRefresh(now time.Time, userID string, refreshable bool) refreshOutcome {
	o.mu.Lock()
	defer o.mu.Unlock()
	if now.Before(o.refreshUntil) {
		return refreshOutcome{httpStatus: 200, Status: "already_running",
			Message: fmt.Sprintf("A refresh is already running; it ends at %s", o.refreshUntil.UTC().Format(time.RFC3339))}
	}
	if !refreshable {
		return refreshOutcome{httpStatus: 409, Status: "no_refreshable_connections",
			Message: "No connection can fetch data: all are expired, revoked or dead. Reconnect a bank, then retry."}
	}
	if balance := o.balance(userID); balance < refreshCost {
		return refreshOutcome{httpStatus: 402, Status: "insufficient_credits", Cost: refreshCost, Balance: &balance,
			Message: fmt.Sprintf("An on-demand refresh costs %d credits; the balance is %d", refreshCost, balance)}
	}
	o.charge(userID, refreshCost)
	o.refreshUntil = now.Add(refreshDuration)
	return refreshOutcome{httpStatus: 200, Status: "accepted", Message: "Refresh started"}
}
