package payments

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"

	"github.com/fintech-bff/bff/internal/mutant"
	"github.com/fintech-bff/bff/internal/problem"
	"github.com/fintech-bff/bff/internal/proxy"
)

// merchantsPath is the upstream's merchants: a merchant payment's money
// goes to the account its merchant has when the upstream acts.
const merchantsPath = "/v2/merchants"

// payee is where a merchant payment's money goes: the merchant's name and
// account, as the upstream has them now.
type payee struct {
	Name string
	IBAN string
}

// payeeOf resolves where a held payment's money goes, when its content
// names only a merchant: the approval then shows and binds the merchant's
// account itself, not an id whose account can be re-pointed. nil when the
// content names its own creditor account (the upstream pays that one).
func (s *Service) payeeOf(ctx context.Context, userID, requestID string, c Content) (*payee, *problem.Problem) {
	if c.Info == nil || c.Info.MerchantID == "" || c.Info.CreditorAccount != nil || mutant.Is(mutant.PayeeUnbound) {
		return nil, nil
	}
	rep, p := s.up.Exchange(ctx, proxy.Exchange{
		Call:   proxy.Call{UserID: userID, RequestID: requestID},
		Target: proxy.Target{Path: merchantsPath + "/" + url.PathEscape(c.Info.MerchantID), Route: merchantsPath},
		Method: http.MethodGet, Header: http.Header{"Accept": {"application/json"}},
	})
	if p != nil {
		return nil, p
	}
	var m struct {
		Name string `json:"name"`
		IBAN string `json:"iban"`
	}
	if rep.Status != http.StatusOK || json.Unmarshal(rep.Body, &m) != nil {
		return nil, problem.Newf(problem.CodeUpstreamError, "the payment's merchant could not be read (the upstream answered %d); nothing was sent", rep.Status)
	}
	if m.IBAN == "" {
		return nil, problem.New(problem.CodeValidationError, "the payment's merchant has no account to pay; nothing was sent")
	}
	return &payee{Name: m.Name, IBAN: m.IBAN}, nil
}

// withPayee is d with the merchant's name and account as its creditor:
// what the user approves is where the money goes.
func withPayee(d paymentInitiation, pe *payee) paymentInitiation {
	if pe == nil {
		return d
	}
	if d.CreditorName == "" {
		d.CreditorName = pe.Name
	}
	d.CreditorAccount = &ibanRef{IBAN: pe.IBAN}
	return d
}
