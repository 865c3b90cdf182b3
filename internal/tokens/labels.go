package tokens

// The results the cache reports to its Observer: the values of the labels
// of bff_token_cache_layer_hits_total{layer} (a miss is
// bff_token_cache_requests_total{result="miss"}) and
// bff_token_lock_wait_seconds{result}, named once here rather than spelled
// at each call.

// Lookup is where a lookup of a user's token found it, or that it found
// none.
type Lookup string

// The lookups.
const (
	LookupLocal Lookup = "local" // this instance's copy (nearcache)
	LookupRedis Lookup = "redis" // the shared store
	LookupMiss  Lookup = "miss"  // neither: a mint follows
)

// Wait is how one step of a wait for another instance's mint of the same
// user's token ended.
type Wait string

// The waits.
const (
	WaitNotified Wait = "notified" // the mint's announcement woke it
	WaitPolled   Wait = "polled"   // its poll interval passed
	WaitTimeout  Wait = "timeout"  // the wait's deadline passed: ErrLockTimeout
)
