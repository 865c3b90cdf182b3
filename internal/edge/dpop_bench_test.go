//go:build integration

package edge

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fintech-bff/bff/internal/dpop"
	"github.com/fintech-bff/bff/internal/metrics"
	"github.com/fintech-bff/bff/internal/session"
	"github.com/fintech-bff/bff/internal/testing/redistest"
)

// BenchmarkTokenRequest is BenchmarkSteadyStateRequest's GET sent with a
// session token: Bearer (an unbound session, the baseline) and DPoP (a
// device-bound session, a new ES256 proof per request, signed before the
// clock starts); and, for the steady-state cookie path, with the cookie of
// an unbound session. Each runs on its own edge, alike: real
// Redis with live local copies, cached token, real upstream, metrics and
// access log. Besides ns/op and allocs it reports the Redis commands the
// edge's client sent per request (redis-cmds/op, counted by a go-redis
// hook; the background's canaries and lease renewals are in both) and the
// process's CPU per request (cpu-ns/op), and make bench-dpop divides each
// by Bearer's of the same run.
func BenchmarkTokenRequest(b *testing.B) {
	for _, scheme := range []string{"Cookie", "Bearer", "DPoP"} {
		b.Run(scheme, func(b *testing.B) { benchmarkTokenRequest(b, scheme) })
	}
}

func benchmarkTokenRequest(b *testing.B, scheme string) {
	bound := scheme == "DPoP"
	reply := strings.Repeat("x", 1000)
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, reply)
	}))
	defer upstream.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rc, prefix := redistest.Client(b)
	cmds := redistest.CountCommands(rc)
	store, sessions, cookies := liveSessionsOn(ctx, b, rc, prefix)
	cache, fwd := liveForwarder(ctx, b, store, upstream.URL)
	verifier, err := dpop.NewVerifier(dpop.Options{Replay: store})
	if err != nil {
		b.Fatal(err)
	}
	m := metrics.New(prometheus.NewRegistry())
	e := NewPublic(Deps{
		Observability: Observability{Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)), Observe: m.Edge},
		Sessions:      Sessions{Manager: sessions, Cookies: cookies, Tokens: cache},
		Clients:       Clients{PublicOrigin: publicOrigin},
		DPoP:          DPoP{Mode: DPoPOptional, Verifier: verifier, Observe: m.DPoP},
		API:           API{Forwarder: fwd},
	})
	k := newProofKey(b)
	n := session.New{UserID: "bench-user", Method: session.MethodMobile}
	if bound {
		n.JKT = k.jkt()
	}
	id, _, err := sessions.Create(ctx, n)
	if err != nil {
		b.Fatal(err)
	}
	ck, err := cookies.New(id)
	if err != nil {
		b.Fatal(err)
	}
	const target = "/api/v2/payments?limit=10"
	htu := publicOrigin + "/api/v2/payments"
	request := func(proof string) *http.Request {
		req := httptest.NewRequest("GET", "http://10.0.3.7:8080"+target, nil)
		switch scheme {
		case "DPoP":
			req.Header.Set("Authorization", "DPoP "+id)
			req.Header.Set("DPoP", proof)
		case "Bearer":
			req.Header.Set("Authorization", "Bearer "+id)
		default:
			req.AddCookie(ck)
		}
		return req
	}
	serve := func(req *http.Request) {
		w := httptest.NewRecorder()
		e.ServeHTTP(w, req)
		if w.Code != 200 {
			b.Fatalf("got %d %s", w.Code, w.Body)
		}
	}
	warm := ""
	if bound {
		warm = k.proof("GET", htu, id)
	}
	serve(request(warm)) // the token minted and cached, the session copied
	// Every request of a bound session needs a proof of its own: signed
	// (as the app does) before the clock starts. The requests are built
	// beforehand for both schemes alike.
	reqs := make([]*http.Request, b.N)
	for i := range reqs {
		p := ""
		if bound {
			p = k.proof("GET", htu, id)
		}
		reqs[i] = request(p)
	}
	b.ReportAllocs()
	cmds.Store(0)
	cpu0 := processCPU(b)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		serve(reqs[i])
	}
	b.StopTimer()
	b.ReportMetric(float64(cmds.Load())/float64(b.N), "redis-cmds/op")
	b.ReportMetric(float64(processCPU(b)-cpu0)/float64(b.N), "cpu-ns/op")
}

// processCPU is the CPU time (user and system) the process has used:
// ns/op is the time a request takes, waits for Redis included; this is
// what it costs the machine (the test's upstream server included, alike
// for both schemes).
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// jkt is the thumbprint of k's public key, as a bound session holds it.
func (k proofKey) jkt() string { return k.Thumbprint() }
