package main

import (
	"bytes"
	"encoding/base64"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"
)

// runStub serves the fast upstream: a ~1 KB JSON reply on the API paths,
// 1 MiB on /v2/data/transactions, tokens at POST /oauth/token (counted,
// the count at GET /_stats). Keep-alive, no logging. For the payments
// section: POST /v2/payments creates, answering 201 with a new id and its
// payUrl, and GET /v2/payments with a query (the BFF's own reads of the
// user's payment list: the snapshot before each payment) is an empty page;
// without a query it is the 1 KB reply the other scenarios read.
func runStub(args []string) int {
	fs := flag.NewFlagSet("stub", flag.ExitOnError)
	addr := fs.String("addr", "127.0.0.1:0", "listen address")
	_ = fs.Parse(args)

	small := jsonBody(1024)
	big := jsonBody(1 << 20)
	var mints, payments atomic.Int64
	run := time.Now().UnixNano()

	mux := http.NewServeMux()
	mux.HandleFunc("POST /oauth/token", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		n := mints.Add(1)
		writeJSON(w, http.StatusOK, tokenReply(n))
	})
	mux.HandleFunc("GET /_stats", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, []byte(`{"mints":`+strconv.FormatInt(mints.Load(), 10)+`}`))
	})
	mux.HandleFunc("POST /v2/payments", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		writeJSON(w, http.StatusCreated, paymentReply(run, payments.Add(1)))
	})
	mux.HandleFunc("GET /v2/payments", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.RawQuery != "" {
			writeJSON(w, http.StatusOK, emptyPage)
			return
		}
		writeJSON(w, http.StatusOK, small)
	})
	mux.HandleFunc("/v2/data/transactions", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, big)
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet || r.Method == http.MethodHead {
			writeJSON(w, http.StatusOK, small)
			return
		}
		_, _ = io.Copy(io.Discard, r.Body)
		writeJSON(w, http.StatusCreated, small)
	})

	srv := &http.Server{Addr: *addr, Handler: mux, ErrorLog: log.New(io.Discard, "", 0)}
	if err := srv.ListenAndServe(); err != nil {
		fmt.Println("stub:", err)
		return 1
	}
	return 0
}

func writeJSON(w http.ResponseWriter, status int, body []byte) {
	h := w.Header()
	h["Content-Type"] = []string{"application/json"}
	h["Content-Length"] = []string{strconv.Itoa(len(body))}
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// jsonBody is a JSON object of about n bytes: {"items":[...],"nextPage":null}.
func jsonBody(n int) []byte {
	var b bytes.Buffer
	b.WriteString(`{"items":[`)
	for i := 0; b.Len() < n-64; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"id":"pay_%06d","amount":%d,"currency":"EUR","status":"settled"}`, i, 1000+i)
	}
	b.WriteString(`],"nextPage":null}`)
	return b.Bytes()
}

// emptyPage is a payment list with nothing in it: a user's first payment.
var emptyPage = []byte(`{"items":[],"nextPage":null}`)

// paymentReply is the creation's answer: the payment's id, unique in the
// stub's run, and where the user authorises it.
func paymentReply(run, n int64) []byte {
	return fmt.Appendf(nil, `{"id":"pay-%x-%d","payUrl":"https://pay.example/consent/pay-%x-%d"}`, run, n, run, n)
}

// tokenReply is the token endpoint's answer: a JWT-shaped token (unsigned
// for the BFF's purposes, which reads exp only) valid for an hour.
func tokenReply(n int64) []byte {
	enc := base64.RawURLEncoding
	header := enc.EncodeToString([]byte(`{"alg":"HS256","typ":"JWT"}`))
	payload := enc.EncodeToString(fmt.Appendf(nil, `{"sub":"bench","jti":"%d","exp":%d}`, n, time.Now().Add(time.Hour).Unix()))
	sig := enc.EncodeToString([]byte("bench-signature-bench-signature!"))
	return fmt.Appendf(nil, `{"accessToken":%q,"tokenType":"Bearer","expiresIn":3600}`, header+"."+payload+"."+sig)
}
