package metrics_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/fintech-bff/bff/internal/dpop"
	"github.com/fintech-bff/bff/internal/edge"
	"github.com/fintech-bff/bff/internal/limits"
	"github.com/fintech-bff/bff/internal/login"
	"github.com/fintech-bff/bff/internal/metrics"
	"github.com/fintech-bff/bff/internal/payments"
	"github.com/fintech-bff/bff/internal/proxy"
	"github.com/fintech-bff/bff/internal/session"
	"github.com/fintech-bff/bff/internal/testing/syncbuf"
	"github.com/fintech-bff/bff/internal/tokens"
)

// samples is every bff_* series reg holds, as `name{label="value",...}`
// (labels sorted by name) to its value; a histogram gives its _count.
func samples(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range families {
		if !strings.HasPrefix(f.GetName(), "bff_") {
			continue
		}
		for _, m := range f.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			name := f.GetName()
			if len(labels) > 0 {
				name += "{" + strings.Join(labels, ",") + "}"
			}
			switch f.GetType() {
			case dto.MetricType_COUNTER:
				out[name] = m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				out[name] = m.GetGauge().GetValue()
			case dto.MetricType_HISTOGRAM:
				out[strings.Replace(name, f.GetName(), f.GetName()+"_count", 1)] = float64(m.GetHistogram().GetSampleCount())
			default:
				t.Fatalf("%s: unexpected type %v", f.GetName(), f.GetType())
			}
		}
	}
	return out
}

// wantSamples checks the series whose name starts with prefix.
func wantSamples(t *testing.T, reg *prometheus.Registry, prefix string, want map[string]float64) {
	t.Helper()
	got := map[string]float64{}
	for k, v := range samples(t, reg) {
		if strings.HasPrefix(k, prefix) {
			got[k] = v
		}
	}
	if !maps.Equal(got, want) {
		t.Errorf("got %s series:\n%s\nwant:\n%s", prefix, show(got), show(want))
	}
}

func show(m map[string]float64) string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(m)) {
		fmt.Fprintf(&b, "  %s %v\n", k, m[k])
	}
	return b.String()
}

func TestTokens(t *testing.T) {
	reg := prometheus.NewRegistry()
	var o tokens.Observer = metrics.New(reg).Tokens
	// Before any event: hit and miss at 0, the unlabelled histogram
	// empty, nothing else.
	wantSamples(t, reg, "bff_token_", map[string]float64{
		`bff_token_cache_requests_total{result="hit"}`:  0,
		`bff_token_cache_requests_total{result="miss"}`: 0,
		`bff_token_mint_duration_seconds_count`:         0,
	})
	o.CacheLookup(tokens.LookupLocal)
	o.CacheLookup(tokens.LookupLocal)
	o.CacheLookup(tokens.LookupRedis)
	o.CacheLookup(tokens.LookupMiss)
	o.Minted(nil, time.Millisecond)
	o.Minted(fmt.Errorf("minting: %w", &tokens.MintError{Kind: tokens.KindAuth}), time.Millisecond)
	o.Minted(errors.New("store down"), time.Millisecond)
	o.LockWait(tokens.WaitNotified, time.Millisecond)
	o.LockWait(tokens.WaitTimeout, time.Second)
	o.Refreshed(nil)
	o.Refreshed(errors.New("x"))
	wantSamples(t, reg, "bff_token_", map[string]float64{
		`bff_token_cache_requests_total{result="hit"}`:         3,
		`bff_token_cache_requests_total{result="miss"}`:        1,
		`bff_token_cache_layer_hits_total{layer="local"}`:      2,
		`bff_token_cache_layer_hits_total{layer="redis"}`:      1,
		`bff_token_mints_total{result="ok"}`:                   1,
		`bff_token_mints_total{result="auth"}`:                 1,
		`bff_token_mints_total{result="error"}`:                1,
		`bff_token_mint_duration_seconds_count`:                3,
		`bff_token_lock_wait_seconds_count{result="notified"}`: 1,
		`bff_token_lock_wait_seconds_count{result="timeout"}`:  1,
		`bff_token_refresh_ahead_total{result="ok"}`:           1,
		`bff_token_refresh_ahead_total{result="error"}`:        1,
	})
}

func TestSessions(t *testing.T) {
	reg := prometheus.NewRegistry()
	var o session.Observer = metrics.New(reg).Sessions
	wantSamples(t, reg, "bff_sessions_", map[string]float64{"bff_sessions_created_total": 0})
	o.Created()
	o.Created()
	wantSamples(t, reg, "bff_sessions_", map[string]float64{"bff_sessions_created_total": 2})
}

func TestLogin(t *testing.T) {
	reg := prometheus.NewRegistry()
	var o login.Observer = metrics.New(reg).Login
	wantSamples(t, reg, "bff_oidc_", map[string]float64{"bff_oidc_key_fetches_total": 0})
	o.KeysFetched()
	wantSamples(t, reg, "bff_oidc_", map[string]float64{"bff_oidc_key_fetches_total": 1})
}

func TestUpstream(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := metrics.New(reg)
	var o proxy.Observer = m.Upstream
	o.Attempted("/v2/payments", 200, "", time.Millisecond)
	o.Attempted("/v2/payments", 200, "", time.Millisecond)
	o.Attempted("/v2/payments", 400, "CLIENT_ERROR", time.Millisecond)
	o.Attempted("/chat/chat/connections/refresh", 0, "", time.Second) // no reply
	wantSamples(t, reg, "bff_upstream_", map[string]float64{
		`bff_upstream_requests_total{route="/v2/payments",status="200",type=""}`:                     2,
		`bff_upstream_requests_total{route="/v2/payments",status="400",type="CLIENT_ERROR"}`:         1,
		`bff_upstream_requests_total{route="/chat/chat/connections/refresh",status="error",type=""}`: 1,
		`bff_upstream_request_duration_seconds_count{route="/v2/payments"}`:                          3,
		`bff_upstream_request_duration_seconds_count{route="/chat/chat/connections/refresh"}`:        1,
	})
}

func TestPayments(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := metrics.New(reg)
	var o payments.Observer = m.Payments
	o.MoneyRequest(payments.MoneyAnswered)
	o.MoneyRequest(payments.MoneyAnswered)
	o.MoneyRequest(payments.MoneyKeyRequired)
	o.Refused(limits.KindRefresh)
	m.Edge.Refused(limits.KindRequests)
	o.Followed(payments.FollowChanged)
	o.Followed(payments.FollowWebhookApplied)
	m.Edge.Webhook(edge.WebhookForged) // answered by the edge alone: the same metric
	wantSamples(t, reg, "bff_payment_follow_", map[string]float64{
		`bff_payment_follow_total{result="changed"}`:         1,
		`bff_payment_follow_total{result="webhook_applied"}`: 1,
		`bff_payment_follow_total{result="webhook_forged"}`:  1,
	})
	wantSamples(t, reg, "bff_money_", map[string]float64{
		`bff_money_requests_total{result="answered"}`:     2,
		`bff_money_requests_total{result="key_required"}`: 1,
	})
	wantSamples(t, reg, "bff_limit_", map[string]float64{
		`bff_limit_refusals_total{limit="refresh"}`:  1,
		`bff_limit_refusals_total{limit="requests"}`: 1,
	})
	if _, ok := samples(t, reg)["bff_payments_unknown"]; ok {
		t.Fatal("bff_payments_unknown before Probe")
	}
}

// bff_store_up and bff_ledger_up ping at scrape time, with a deadline:
// 1 when the ping answers, else 0.
func TestProbesUp(t *testing.T) {
	reg := prometheus.NewRegistry()
	ping := func(err error) func(context.Context) error {
		return func(ctx context.Context) error {
			if _, ok := ctx.Deadline(); !ok {
				t.Error("ping without a deadline")
			}
			return err
		}
	}
	metrics.New(reg).Probe(metrics.Probes{Store: ping(nil), Ledger: ping(errors.New("down"))})
	wantSamples(t, reg, "bff_store_up", map[string]float64{"bff_store_up": 1})
	wantSamples(t, reg, "bff_ledger_up", map[string]float64{"bff_ledger_up": 0})
}

// The event streams' gauges read the hub at scrape time, and each
// refusal by the streams' bounds counts under its own limit.
func TestStreams(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := metrics.New(reg)
	open := 3
	m.Probe(metrics.Probes{Streams: func() int { return open }, StreamsLimit: func() int { return 512 }})
	for _, limit := range []limits.Kind{limits.KindStreams, limits.KindStreamsAddress, limits.KindStreamsAddress, limits.KindStreamsInstance} {
		m.Edge.Refused(limit)
	}
	wantSamples(t, reg, "bff_event_streams", map[string]float64{"bff_event_streams": 3, "bff_event_streams_limit": 512})
	open = 4
	wantSamples(t, reg, "bff_event_streams", map[string]float64{"bff_event_streams": 4, "bff_event_streams_limit": 512})
	wantSamples(t, reg, "bff_limit_", map[string]float64{
		`bff_limit_refusals_total{limit="streams"}`:          1,
		`bff_limit_refusals_total{limit="streams_address"}`:  2,
		`bff_limit_refusals_total{limit="streams_instance"}`: 1,
	})
}

// The unknown payments' gauges read the ledger at scrape time, at most
// once a second for both; NaN while it does not answer.
func TestPaymentsUnknownGauges(t *testing.T) {
	for _, tc := range []struct {
		name      string
		n         int64
		oldest    time.Duration // ago; 0: none
		err       error
		wantN     float64
		wantOlder float64 // the age is at least this
	}{
		{name: "none", wantN: 0},
		{name: "two, the oldest a minute ago", n: 2, oldest: time.Minute, wantN: 2, wantOlder: 60},
		{name: "ledger down", err: errors.New("down"), wantN: math.NaN(), wantOlder: math.NaN()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			reads := 0
			metrics.New(reg).Probe(metrics.Probes{Unknowns: func(ctx context.Context) (int64, time.Time, error) {
				reads++
				if _, ok := ctx.Deadline(); !ok {
					t.Error("read without a deadline")
				}
				var oldest time.Time
				if tc.oldest > 0 {
					oldest = time.Now().Add(-tc.oldest)
				}
				return tc.n, oldest, tc.err
			}})
			s := samples(t, reg)
			n, age := s["bff_payments_unknown"], s["bff_payments_unknown_oldest_seconds"]
			if math.IsNaN(tc.wantN) {
				if !math.IsNaN(n) || !math.IsNaN(age) {
					t.Fatalf("got %v and %v, want NaN for both", n, age)
				}
			} else if n != tc.wantN || age < tc.wantOlder || age > tc.wantOlder+60 || tc.oldest == 0 && age != 0 {
				t.Fatalf("got %v unknown, the oldest %v s ago; want %v, %v s ago", n, age, tc.wantN, tc.wantOlder)
			}
			samples(t, reg)
			if reads != 1 {
				t.Fatalf("got %d reads for two scrapes within a second, want 1", reads)
			}
		})
	}
}

// The edge is the one Observer checked here rather than beside its type:
// the edge's benchmark uses metrics.Edge, so this package does not import
// the edge.
var _ edge.Observer = (*metrics.Edge)(nil)

func TestEdge(t *testing.T) {
	reg := prometheus.NewRegistry()
	var o edge.Observer = metrics.New(reg).Edge
	o.Served("/api/v2/payments", "GET", 200, time.Millisecond)
	o.Served("/api/v2/payments", "GET", 200, time.Millisecond)
	o.Served("/api/v2/payments", "GET", 502, time.Millisecond)
	o.Served("/api/*", "BREW", 405, time.Millisecond) // an unknown method is OTHER
	o.Problem("UPSTREAM_ERROR")
	o.Problem("METHOD_NOT_ALLOWED")
	o.Problem("SOME_UPSTREAM_TYPE") // not the BFF's: UPSTREAM_OTHER
	o.Problem("ANOTHER_ONE")
	o.Login(login.MethodDev, login.OutcomeOK)
	o.Login(login.MethodUnknown, login.OutcomeState)
	o.Revoked(session.ReasonAdmin, 3)
	o.Revoked(session.ReasonLogout, 1)
	o.Refused(limits.KindAuth)
	o.Webhook(edge.WebhookStale)
	o.Webhook(edge.WebhookIgnored)
	wantSamples(t, reg, "bff_http_", map[string]float64{
		`bff_http_requests_total{code="200",method="GET",route="/api/v2/payments"}`:      2,
		`bff_http_requests_total{code="502",method="GET",route="/api/v2/payments"}`:      1,
		`bff_http_requests_total{code="405",method="OTHER",route="/api/*"}`:              1,
		`bff_http_request_duration_seconds_count{method="GET",route="/api/v2/payments"}`: 3,
		`bff_http_request_duration_seconds_count{method="OTHER",route="/api/*"}`:         1,
	})
	wantSamples(t, reg, "bff_errors_", map[string]float64{
		`bff_errors_total{code="UPSTREAM_ERROR"}`:     1,
		`bff_errors_total{code="METHOD_NOT_ALLOWED"}`: 1,
		`bff_errors_total{code="UPSTREAM_OTHER"}`:     2,
	})
	wantSamples(t, reg, "bff_logins_", map[string]float64{
		`bff_logins_total{method="dev",result="ok"}`:        1,
		`bff_logins_total{method="unknown",result="state"}`: 1,
	})
	wantSamples(t, reg, "bff_session_revocations_", map[string]float64{
		`bff_session_revocations_total{reason="admin"}`:  3,
		`bff_session_revocations_total{reason="logout"}`: 1,
	})
	wantSamples(t, reg, "bff_limit_", map[string]float64{`bff_limit_refusals_total{limit="auth"}`: 1})
	wantSamples(t, reg, "bff_payment_follow_", map[string]float64{
		`bff_payment_follow_total{result="webhook_stale"}`:   1,
		`bff_payment_follow_total{result="webhook_ignored"}`: 1,
	})
}

var _ edge.DPoPObserver = (*metrics.DPoP)(nil)

// The device binding's counters: at zero before any login, then by use
// and result, and by binding.
func TestDPoP(t *testing.T) {
	reg := prometheus.NewRegistry()
	var o edge.DPoPObserver = metrics.New(reg).DPoP
	wantSamples(t, reg, "bff_dpop_", map[string]float64{
		`bff_dpop_native_sessions_total{binding="bearer"}`: 0,
		`bff_dpop_native_sessions_total{binding="dpop"}`:   0,
		`bff_dpop_proofs_total{result="ok",use="login"}`:   0,
		`bff_dpop_proofs_total{result="ok",use="request"}`: 0,
	})
	o.Proof(dpop.UseLogin, "") // accepted
	o.Proof(dpop.UseRequest, "")
	o.Proof(dpop.UseRequest, "")
	o.Proof(dpop.UseRequest, dpop.ReasonReplay)
	o.NativeSession(dpop.BindingDPoP)
	o.NativeSession(dpop.BindingBearer)
	o.NativeSession(dpop.BindingDPoP)
	wantSamples(t, reg, "bff_dpop_", map[string]float64{
		`bff_dpop_native_sessions_total{binding="bearer"}`:     1,
		`bff_dpop_native_sessions_total{binding="dpop"}`:       2,
		`bff_dpop_proofs_total{result="ok",use="login"}`:       1,
		`bff_dpop_proofs_total{result="ok",use="request"}`:     2,
		`bff_dpop_proofs_total{result="replay",use="request"}`: 1,
	})
}

// The request budgets' failed exchanges: the first is a warning with its
// error, the others are not logged.
func TestBudgets(t *testing.T) {
	var logs syncbuf.Buffer
	var o limits.Observer = metrics.NewBudgets(slog.New(slog.NewJSONHandler(&logs, nil)))
	o.ExchangeFailed(errors.New("NOPERM this user has no permissions"))
	o.ExchangeFailed(errors.New("i/o timeout"))
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	if len(lines) != 1 || !strings.Contains(lines[0], `"level":"WARN"`) || !strings.Contains(lines[0], "NOPERM") {
		t.Fatalf("got %q, want one warning naming the first error", lines)
	}
}

// Every bff_* metric is registered once: a second set on the same
// registry is refused, and the Go and process collectors are there.
func TestRegisteredOnce(t *testing.T) {
	reg := prometheus.NewRegistry()
	metrics.New(reg)
	defer func() {
		if recover() == nil {
			t.Error("a second New on the same registry did not panic")
		}
	}()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var goGC, process bool
	for _, f := range families {
		goGC = goGC || f.GetName() == "go_goroutines"
		process = process || strings.HasPrefix(f.GetName(), "process_")
	}
	if !goGC || !process {
		t.Errorf("got go collector %v, process collector %v; want both", goGC, process)
	}
	metrics.New(reg)
}
