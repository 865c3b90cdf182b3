//go:build !brokenrule

package payments

import "github.com/fintech-bff/bff/internal/ledger"

// brokenRule is false: the rules stand as docs/payments.md states them.
// The build tag brokenrule turns it on (rule_broken.go), so that the
// history checker (e2e/history_test.go) and the hold checker
// (stepup_history_test.go) are shown to catch a broken rule; no product
// build sets it.
const brokenRule = false

// namedByAnother is used only by the broken rule.
func namedByAnother(Listed, []ledger.Other) bool { return false }
