package nearcache

import "github.com/fintech-bff/bff/internal/nearcache/internal/localcache"

// A copy is kept as bytes (Options.Append writes them, Options.Read reads
// them back), so that the copies hold no pointer for the garbage collector
// to follow (internal/localcache says why).

// AppendInt appends v to b, in 8 bytes, for a Reader's Int.
func AppendInt(b []byte, v int64) []byte { return localcache.AppendInt(b, v) }

// AppendString appends s to b, after its length, for a Reader's String or
// Bytes.
func AppendString(b []byte, s string) []byte { return localcache.AppendString(b, s) }

// Reader reads back, in order, what AppendInt and AppendString wrote: an
// Options.Read's way through a copy's bytes. Its Bytes are the layer's
// memory, valid only during the Read; its String is a copy.
type Reader = localcache.Reader
