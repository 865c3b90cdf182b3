package nearcache

import "time"

// Serve returns key's copy if it may be served now (mayServe); else the
// caller reads the store. It is the only way a copy leaves the layer.
//
// A copy read just before a Forget removed it would otherwise be judged
// after the Forget (and the acknowledgement that lets a revocation answer)
// by a lease or a subscription that still holds: so the copy is refused
// when any Forget ended while it was read, and the clock the rule reads is
// read after the copy, so a pause in between only shortens the lease.
func (l *Layer[T]) Serve(key string) (T, bool) {
	forgets := l.forgets.Load()
	e, ok := l.local.GetAt(key, l.o.Now())
	now := l.o.Now()
	if !ok || l.forgets.Load() != forgets || !l.mayServe(e, now) {
		var zero T
		return zero, false
	}
	return e.v, true
}

// mayServe is the one rule for serving a copy instead of reading the
// store. Every condition is a way a copy of something ended elsewhere (a
// session logged out or revoked on another instance) is refused:
//
//   - live: the channel's subscription is up. An end is announced on it,
//     and the announcement forgets the copy (members.go); while it is down
//     an announcement could be missed, so no copy is served (and every
//     copy is forgotten when it goes down or comes back).
//   - trusted: in a group, this instance's lease holds on the layer's
//     clock. A revocation waits until every member acknowledged forgetting
//     the copy or its lease ran out, and a member with an announcement
//     pending cannot renew: one that missed it (a cut subscription, a
//     paused process) stops trusting its copies before the revocation
//     answers, and forgets them all before it renews (members.go).
//   - fresh: the store reports every change of the keys and confirmed it
//     within kv.LeaseFor (Tracked; the delete is then reported even if no
//     message came), or else the copy's read began less than MaxAge ago:
//     the bound on a delete whose message was lost.
//   - not expired: what the copy holds has not ended by itself (Expires:
//     a session's idle or absolute deadline, a token's serve-until).
func (l *Layer[T]) mayServe(e entry[T], now time.Time) bool {
	at := instant(now)
	live := l.live.Load()
	trusted := l.o.Members == nil || at < l.trustUntil.Load()
	fresh := l.tracking.fresh(at) || at-e.read < int64(l.o.MaxAge)
	return live && trusted && fresh && now.Before(l.o.Expires(e.v))
}
