package proxy

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/fintech-bff/bff/internal/problem"
)

// Exchange is one upstream request whose answer the caller reads whole
// (payments: a money-moving request, the settling look-ups, the refresh)
// instead of streaming it to the client.
type Exchange struct {
	Call
	Target   Target
	Method   string
	RawQuery string
	// Header holds the client's headers; only the allowlisted ones are
	// sent (as Forward sends them), with the BFF's own.
	Header http.Header
	Body   []byte
	// Once sends the request at most once: no retry, and no resend after
	// a 401 (the user's token is dropped and the 401 returned, for the
	// caller to settle before anything is sent again).
	Once bool
	// BeforeSend, when set, runs once the user's token is ready, right
	// before the request leaves. When it fails nothing is sent, and its
	// error is the exchange's failure (as is, when a *problem.Problem).
	BeforeSend func(context.Context) error
}

// Reply is what came back of an exchange, whether it succeeded or not.
type Reply struct {
	Status int         // the upstream's status; 0 when there was no answer
	Header http.Header // the reply's headers, by the same allowlist as Forward
	Body   []byte
	// Date is the upstream's Date header (zero when absent or malformed):
	// its clock, to the second.
	Date time.Time
	// Sent: the request may have reached the upstream. False only when it
	// provably did not (no token, BeforeSend failed, no connection, or it
	// was never written whole).
	Sent bool
	// Incomplete: an answer began but its body was cut or over the bound;
	// Body is not the whole of it.
	Incomplete bool
	// Type is the upstream error body's type (or refresh status), bounded
	// as in the metrics; ErrorTypeNone when there was none.
	Type ErrorType
}

// Answered reports whether the upstream's whole answer is in the reply.
func (r Reply) Answered() bool { return r.Status > 0 && !r.Incomplete }

// MaxReplyBytes bounds the reply an exchange reads.
const MaxReplyBytes = 1 << 20

// Exchange sends x upstream with the user's token, within the upstream
// timeout (and ctx), and reads the reply whole. It returns the reply and,
// when the exchange failed (an upstream error status, no answer, a cut
// answer), the failure as the client would see it.
func (f *Forwarder) Exchange(ctx context.Context, x Exchange) (Reply, *problem.Problem) {
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	st := &callState{Call: x.Call, path: x.Target.Path, route: x.Target.Route, once: x.Once, beforeSend: x.BeforeSend}
	u := *f.base
	u.Path = strings.TrimSuffix(u.Path, "/") + x.Target.Path
	u.RawPath, u.RawQuery = "", x.RawQuery
	var body io.Reader
	if len(x.Body) > 0 {
		body = bytes.NewReader(x.Body)
	}
	req, err := http.NewRequestWithContext(context.WithValue(ctx, callKey{}, st), x.Method, u.String(), body)
	if err != nil {
		return Reply{}, problem.Wrap(problem.CodeBadRequest, "the request could not be made", err)
	}
	req.Header = upstreamHeader(x.Header, x.Call)
	if x.Once {
		req.GetBody = nil // nothing may send it again on its own
	}
	resp, err := f.upstream.RoundTrip(req)
	if err != nil {
		// An answer came back (a status seen), or the request left and
		// was not proven unwritten: it may have reached the upstream.
		sent := st.upstreamStatus > 0 || (!notSent(err) && (st.written == nil || st.written.Load()))
		return Reply{Status: st.upstreamStatus, Sent: sent, Incomplete: st.upstreamStatus > 0, Type: st.upstreamType},
			f.classify(ctx, err)
	}
	defer resp.Body.Close()
	rep := Reply{Status: resp.StatusCode, Sent: true, Type: st.upstreamType}
	if d, err := http.ParseTime(resp.Header.Get("Date")); err == nil {
		rep.Date = d
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, MaxReplyBytes+1))
	if err != nil || len(b) > MaxReplyBytes {
		rep.Incomplete = true
		if err == nil {
			return rep, problem.New(problem.CodeUpstreamError, "the upstream's answer is too large to keep")
		}
		return rep, f.classify(ctx, err)
	}
	rep.Body = b
	resp.Body = io.NopCloser(bytes.NewReader(b))
	err = modifyResponse(resp) // the header allowlist; an error status normalised
	rep.Header = resp.Header
	if ue, ok := err.(upstreamError); ok {
		return rep, ue.p
	}
	return rep, nil
}
