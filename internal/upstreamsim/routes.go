package upstreamsim

import (
	"io"
	"net/http"
	"time"
)

// call is what a handler gets besides the request: the body (already read),
// the simulator time of the request and, on authenticated routes, the
// verified token's claims.
type call struct {
	body   []byte
	now    time.Time // the simulator's time in whole seconds, as replies show it
	at     time.Time // the same instant exactly, for the list lag
	claims *claims
}

func (c *call) userID() string { return c.claims.Sub }

// handlerFunc serves one route. A non-nil *apiError is rendered as the reply.
type handlerFunc func(w http.ResponseWriter, r *http.Request, c *call) *apiError

// route is one upstream endpoint. Public routes need no Bearer token.
type route struct {
	pattern string
	public  bool
	h       handlerFunc
}

// routes lists every upstream endpoint in one place. Anything else —
// including a known path with another method — is an unknown route: 404
// CLIENT_ERROR.
func (s *Server) routes() http.Handler {
	table := []route{
		{"POST /oauth/token", true, s.handleToken},

		{"GET /v2/payments", false, s.listPayments},
		{"POST /v2/payments", false, s.createPayment},
		{"GET /v2/payments/{paymentId}", false, s.getPayment},
		{"DELETE /v2/payments/{paymentId}", false, s.cancelPayment},
		{"POST /v2/pay/open-banking-init", false, s.openBankingInit},

		{"GET /v2/connections", false, s.listConnections},
		{"POST /v2/connections", false, s.createConnection},
		{"GET /v2/connections/{connectionId}", false, s.getConnection},
		{"DELETE /v2/connections/{connectionId}", false, s.deleteConnection},

		{"GET /v2/data/accounts", false, s.listAccounts},
		{"GET /v2/data/accounts/{accountId}", false, s.getAccount},
		{"GET /v2/data/transactions", false, s.listTransactions},
		{"GET /v2/data/transactions/{sk}", false, s.getTransaction},
		{"PATCH /v2/data/transactions/{sk}", false, s.patchTransaction},
		{"GET /v2/data/transaction-categories", false, s.listCategories},

		{"GET /v2/providers", false, s.listProviders},
		{"GET /v2/bank-branches", false, s.listBankBranches},

		{"GET /v2/merchants", false, s.listMerchants},
		{"POST /v2/merchants", false, s.createMerchant},
		{"GET /v2/merchants/{merchantId}", false, s.getMerchant},
		{"PUT /v2/merchants/{merchantId}", false, s.updateMerchant},
		{"DELETE /v2/merchants/{merchantId}", false, s.deleteMerchant},

		{"POST /chat/chat/connections/refresh", false, s.refresh},
	}
	mux := http.NewServeMux()
	for _, rt := range table {
		mux.Handle(rt.pattern, s.adapt(rt))
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeAPIError(w, notFound("Cannot %s %s", r.Method, r.URL.Path))
	})
	return mux
}

// adapt turns a route into an http.Handler: it authenticates non-public
// routes (401, connector rules, plan gate) before calling the handler.
func (s *Server) adapt(rt route) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		at := s.clock.exact()
		c := &call{body: body, now: at.Truncate(time.Second), at: at}
		if !rt.public {
			cl, e := s.authorize(r, c.now)
			if e != nil {
				writeAPIError(w, e)
				return
			}
			c.claims = cl
			if e := s.personaPlanGate(cl.Sub); e != nil {
				writeAPIError(w, e)
				return
			}
		}
		if e := rt.h(w, r, c); e != nil {
			writeAPIError(w, e)
		}
	})
}
