// Package kv is the BFF's shared key-value store: Redis (single node,
// Sentinel or Cluster through go-redis's universal client) for every
// production deployment, and an in-process map for one-instance development.
//
// The session and token packages each define the small interface they need;
// *Redis and *Memory satisfy both. Keys passed in are relative: each store
// adds its configured prefix.
package kv

import (
	"errors"
	"time"
)

// ErrNotFound is returned by Get for a missing or expired key.
var ErrNotFound = errors.New("kv: not found")

// ErrUnavailable wraps every failure to reach the store. Callers map it to
// 503 SESSION_STORE_UNAVAILABLE: the BFF fails closed.
var ErrUnavailable = errors.New("kv: store unavailable")

// Clock returns the current time. Tests inject one to move time.
type Clock func() time.Time
