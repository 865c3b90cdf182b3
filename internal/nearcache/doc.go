// Package nearcache is the near-cache sessions and tokens share: each
// instance's local copies of keys the shared store holds, and everything
// that decides whether a copy may be served. It is the only place that
// decides it: the session and token packages keep no copy and no rule of
// their own.
//
// Where a cached session is refused after a logout: serve.go. Serve
// applies the one rule (mayServe) to every copy, and its doc lists each
// condition and the way a revoked session's copy fails it.
//
// The package by file:
//
//   - serve.go: the rule "may this copy be served" (Serve, mayServe).
//   - layer.go: the layer (Layer, Options, New, Run) and what keeps its
//     copies correct: the store's reports of changed keys (kv.Tracker),
//     the instances' channel, and the invalidate-versus-fill race (a read
//     that began before its key changed keeps nothing: Keep, BeginRead).
//   - members.go: for a layer in a group (sessions), the lease that bounds
//     how long a copy is trusted, and the announcement of ended keys that
//     returns only once every member forgot them or its lease ran out
//     (Announce): Chubby's rule for its client caches (Burrows, OSDI 2006).
//   - versions.go: the count of each key's changes that Keep checks.
//   - clock.go: the layer's one clock (Options.Now) and the freshness of the
//     store's reports, measured on it.
//   - codec.go: how a caller writes and reads a copy as bytes.
//   - internal/localcache: the copies' memory, bounded in bytes, with no
//     pointer per entry (its doc says why it is our own code).
//
// Words: to forget is to remove this instance's copy (Forget, ForgetAll);
// it never touches the shared store. What the store deletes is ended by
// the caller (a session's logout), which then announces it.
package nearcache
