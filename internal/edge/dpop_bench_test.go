//go:build integration

package edge

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fintech-bff/bff/internal/dpop"
	"github.com/fintech-bff/bff/internal/kv"
	"github.com/fintech-bff/bff/internal/metrics"
	"github.com/fintech-bff/bff/internal/session"
	"github.com/fintech-bff/bff/internal/testing/redistest"
)

// tokenRequestProfile is where BenchmarkTokenRequest* write a CPU profile of
// their requests alone (go test's -cpuprofile also holds the setup, the
// signing of the proofs and the deletion of their jti keys after).
var tokenRequestProfile = flag.String("tokenrequest.cpuprofile", "",
	"a directory: each BenchmarkTokenRequest* run writes there a CPU profile of its timed requests only")

// tokenRequestParallelism is how many requests BenchmarkTokenRequestParallel
// has in flight per P (b.SetParallelism): enough that a request waiting
// on a socket always leaves another one to run, as on a loaded instance.
const tokenRequestParallelism = 8

// BenchmarkTokenRequest is BenchmarkSteadyStateRequest's GET sent with a
// session token: Bearer (an unbound session, the baseline) and DPoP (a
// device-bound session, a new ES256 proof per request, signed before the
// clock starts); and, for the steady-state cookie path, with the cookie of
// an unbound session. Each runs on its own edge, alike: real
// Redis with live local copies, cached token, real upstream, metrics and
// access log. The requests are sent one at a time. Besides ns/op and
// allocs it reports the Redis commands the edge's client sent per request
// (redis-cmds/op, counted by a go-redis hook; the background's canaries and
// lease renewals are in both), the process's CPU per request (cpu-ns/op)
// and its voluntary context switches per request (ctxsw/op: a thread of
// the process went to sleep, having nothing to run, and was woken), and
// make bench-dpop divides each by Bearer's of the same run.
func BenchmarkTokenRequest(b *testing.B) {
	for _, scheme := range []string{"Cookie", "Bearer", "DPoP"} {
		b.Run(scheme, func(b *testing.B) { benchmarkTokenRequest(b, scheme, 0) })
	}
}

// BenchmarkTokenRequestParallel is BenchmarkTokenRequest's requests sent
// as a busy instance receives them: tokenRequestParallelism per P at once
// (b.RunParallel), for every kind alike. One at a time, each wait on a
// socket (the upstream's answer; for DPoP also the jti claim's in Redis)
// leaves the process with nothing to run: its threads sleep and are woken
// when the answer comes, a cost a loaded instance, whose other requests
// fill the wait, does not pay per request.
func BenchmarkTokenRequestParallel(b *testing.B) {
	for _, scheme := range []string{"Cookie", "Bearer", "DPoP"} {
		b.Run(scheme, func(b *testing.B) { benchmarkTokenRequest(b, scheme, tokenRequestParallelism) })
	}
}

// benchmarkTokenRequest sends b.N requests of scheme, one at a time, or
// with b.RunParallel at parallelism per P when it is not 0.
func benchmarkTokenRequest(b *testing.B, scheme string, parallelism int) {
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
	// The jti claims as the product sends them (cmd/bff): concurrent
	// proofs' claims share a round trip.
	verifier, err := dpop.NewVerifier(dpop.Options{Replay: kv.NewClaims(store, kv.DefaultClaimBatch)})
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
	serve := func(req *http.Request) error {
		w := httptest.NewRecorder()
		e.ServeHTTP(w, req)
		if w.Code != 200 {
			return fmt.Errorf("got %d %s", w.Code, w.Body)
		}
		return nil
	}
	warm := ""
	if bound {
		warm = k.proof("GET", htu, id)
	}
	if err := serve(request(warm)); err != nil { // the token minted and cached, the session copied
		b.Fatal(err)
	}
	// Every request of a bound session needs a proof of its own: signed
	// (as the app does) before the clock starts. The requests are built
	// beforehand for every scheme alike.
	reqs := make([]*http.Request, b.N)
	for i := range reqs {
		p := ""
		if bound {
			p = k.proof("GET", htu, id)
		}
		reqs[i] = request(p)
	}
	// The signing's garbage (the DPoP run's alone) is collected now, not
	// by the requests' collections.
	runtime.GC()
	stopProfile := startTokenRequestProfile(b)
	b.ReportAllocs()
	cmds.Store(0)
	use0 := processUsage(b)
	b.ResetTimer()
	if parallelism == 0 {
		for i := 0; i < b.N; i++ {
			if err := serve(reqs[i]); err != nil {
				b.Fatal(err)
			}
		}
	} else {
		var next atomic.Int64
		b.SetParallelism(parallelism)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := serve(reqs[next.Add(1)-1]); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	b.StopTimer()
	use := processUsage(b)
	stopProfile()
	b.ReportMetric(float64(cmds.Load())/float64(b.N), "redis-cmds/op")
	b.ReportMetric(float64(use.cpu-use0.cpu)/float64(b.N), "cpu-ns/op")
	b.ReportMetric(float64(use.sleeps-use0.sleeps)/float64(b.N), "ctxsw/op")
}

// startTokenRequestProfile starts the CPU profile of b's requests when
// -tokenrequest.cpuprofile names a directory, and returns what stops it.
func startTokenRequestProfile(b *testing.B) (stop func()) {
	if *tokenRequestProfile == "" {
		return func() {}
	}
	f, err := os.Create(filepath.Join(*tokenRequestProfile, strings.ReplaceAll(b.Name(), "/", "_")+".prof"))
	if err != nil {
		b.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		b.Fatal(err)
	}
	return func() {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			b.Error(err)
		}
	}
}

// usage is what the process has used so far: its CPU time (user and
// system), and how many times one of its threads went to sleep
// (voluntary context switches: waiting for a socket, a lock or work).
type usage struct {
	cpu    time.Duration
	sleeps int64
}

// processUsage is the process's usage: ns/op is the time a request takes,
// waits for Redis included; cpu is what it costs the machine (the test's
// upstream server included, alike for every scheme).
func processUsage(b *testing.B) usage {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return usage{cpu: time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), sleeps: ru.Nvcsw}
}

// jkt is the thumbprint of k's public key, as a bound session holds it.
func (k proofKey) jkt() string { return k.Thumbprint() }
