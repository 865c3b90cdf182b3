package main

import (
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"runtime"
	"time"
)

// runBaseline serves the reference: a bare httputil.ReverseProxy to the
// upstream that adds a fixed Bearer, over a transport tuned for keep-alive.
// A second listener answers /metrics with go_memstats_mallocs_total so
// allocations per request compare with the BFF's.
func runBaseline(args []string) int {
	fs := flag.NewFlagSet("baseline", flag.ExitOnError)
	addr := fs.String("addr", "127.0.0.1:0", "proxy listen address")
	metricsAddr := fs.String("metrics", "127.0.0.1:0", "metrics listen address")
	upstream := fs.String("upstream", "", "upstream base URL")
	_ = fs.Parse(args)

	target, err := url.Parse(*upstream)
	if err != nil || target.Host == "" {
		fmt.Println("baseline: -upstream must be a URL")
		return 2
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.Header.Set("Authorization", "Bearer x")
		},
		Transport: tunedTransport(),
		ErrorLog:  log.New(io.Discard, "", 0),
	}
	go serveMallocs(*metricsAddr)
	srv := &http.Server{Addr: *addr, Handler: rp, ErrorLog: log.New(io.Discard, "", 0)}
	if err := srv.ListenAndServe(); err != nil {
		fmt.Println("baseline:", err)
		return 1
	}
	return 0
}

func tunedTransport() *http.Transport {
	return &http.Transport{
		Proxy:                 nil,
		DialContext:           (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:          256,
		MaxIdleConnsPerHost:   128,
		IdleConnTimeout:       90 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
}

func serveMallocs(addr string) {
	mux := http.NewServeMux()
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, r *http.Request) {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		fmt.Fprintf(w, "go_memstats_mallocs_total %d\n", ms.Mallocs)
	})
	_ = http.ListenAndServe(addr, mux)
}
