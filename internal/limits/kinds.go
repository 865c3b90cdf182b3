package limits

// Kind names a limit that refuses requests before they reach the upstream:
// the value of bff_limit_refusals_total{limit}, named once here rather than
// spelled at each call. The per-address budgets also begin their keys with
// it, so a value is never changed (it names a budget's counters in the
// store, and dashboards and alerts read it).
type Kind string

// The limits, by what they bound.
const (
	// KindRequests is a session's request budget on /api (Budget).
	KindRequests Kind = "requests"
	// KindAuth is a client address's budget on /auth/*.
	KindAuth Kind = "auth"
	// KindBackchannel is a client address's budget of refused
	// back-channel logouts.
	KindBackchannel Kind = "backchannel"
	// KindPendingLogins is a client address's budget of logins started.
	KindPendingLogins Kind = "pending_logins"
	// KindDPoP is a client address's budget of refused DPoP proofs.
	KindDPoP Kind = "dpop"
	// KindRefresh is a user's hold of the on-demand refresh (Hold).
	KindRefresh Kind = "refresh"
	// KindStreams is a user's open event streams on an instance.
	KindStreams Kind = "streams"
	// KindStreamsAddress is a client address's open event streams on an
	// instance.
	KindStreamsAddress Kind = "streams_address"
	// KindStreamsInstance is the open event streams an instance holds.
	KindStreamsInstance Kind = "streams_instance"
)
