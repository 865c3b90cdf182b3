package events

// An instance's bound on its streams, when limits.streams_per_instance
// leaves it to the process (docs/operations.md, "Event streams").
const (
	// maxDerived caps the derived bound: a limit of millions of
	// descriptors (or none) says nothing of the memory behind them.
	maxDerived = 1_000_000
	// unknownBound is the bound where the descriptor limit cannot be read
	// (not Unix).
	unknownBound = 10_000
)

// InstanceBound is the most streams one instance holds: configured when
// it is above 0; otherwise half the process's limit on open descriptors
// (the soft RLIMIT_NOFILE as it runs: Go raises it to the hard limit at
// start), at most 1,000,000, and 10,000 where the limit cannot be read.
// Each stream holds one descriptor; the other half is left for everything
// else that holds one: requests' connections, Redis, PostgreSQL, the
// upstream, files.
func InstanceBound(configured int) int {
	if configured > 0 {
		return configured
	}
	return derivedBound(DescriptorLimit())
}

// derivedBound is InstanceBound's share of nofile descriptors (0:
// unknown).
func derivedBound(nofile uint64) int {
	if nofile == 0 {
		return unknownBound
	}
	return int(max(min(nofile/2, maxDerived), 1))
}
