package payments

import (
	"bytes"
	"encoding/json"
	"net/http"

	"github.com/fintech-bff/bff/internal/ledger"
)

// replay writes a stored response, marked Idempotent-Replayed, and returns
// its error code when it is a stored refusal.
func replay(w http.ResponseWriter, s *ledger.Response) string {
	h := w.Header()
	for k, v := range s.Header {
		h[k] = v
	}
	h.Set("Idempotent-Replayed", "true")
	code := ""
	if s.Status >= 400 {
		var p struct {
			Code string `json:"code"`
		}
		if json.Unmarshal(s.Body, &p) == nil {
			code = p.Code
		}
	}
	w.WriteHeader(s.Status)
	_, _ = w.Write(s.Body)
	return code
}

// recorder holds a whole response, so it can be stored before the client
// sees it. It is an http.ResponseWriter for problem.Write.
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func fromResponse(r *ledger.Response) *recorder {
	rec := &recorder{header: r.Header.Clone(), status: r.Status}
	rec.body.Write(r.Body)
	return rec
}

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(status int) {
	if r.status == 0 {
		r.status = status
	}
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.body.Write(b)
}

func (r *recorder) write(status int, h http.Header, body []byte) {
	for k, v := range h {
		r.header[k] = v
	}
	r.WriteHeader(status)
	_, _ = r.Write(body)
}

// response is what the ledger keeps of r for replay.
func (r *recorder) response() *ledger.Response {
	h := http.Header{}
	for _, k := range replayHeaders {
		if v := r.header.Values(k); len(v) > 0 {
			h[k] = v
		}
	}
	return &ledger.Response{Status: r.status, Header: h, Body: bytes.Clone(r.body.Bytes())}
}

func (r *recorder) copyTo(w http.ResponseWriter) {
	h := w.Header()
	for k, v := range r.header {
		h[k] = v
	}
	if r.status == 0 {
		r.status = http.StatusOK
	}
	w.WriteHeader(r.status)
	_, _ = w.Write(r.body.Bytes())
}

// replayHeaders are the response headers kept with a stored response.
var replayHeaders = []string{"Content-Type", "Location", "Retry-After", "Allow", "Cache-Control", "X-Request-Id"}
