package localcache

import "encoding/binary"

// AppendInt appends v to b, in 8 bytes, for a Reader's Int.
func AppendInt(b []byte, v int64) []byte { return binary.LittleEndian.AppendUint64(b, uint64(v)) }

// AppendString appends s to b, after its length, for a Reader's String or
// Bytes.
func AppendString(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

// Reader reads back, in order, what AppendInt and AppendString wrote: an
// Options.Read's way through the cache's bytes.
type Reader []byte

// Int reads an AppendInt.
func (r *Reader) Int() int64 {
	v := int64(binary.LittleEndian.Uint64(*r))
	*r = (*r)[8:]
	return v
}

// Bytes reads an AppendString without a copy: the bytes are the cache's,
// valid only during the Read.
func (r *Reader) Bytes() []byte {
	n, k := binary.Uvarint(*r)
	b := (*r)[k : k+int(n)]
	*r = (*r)[k+int(n):]
	return b
}

// String reads an AppendString as a string of its own.
func (r *Reader) String() string { return string(r.Bytes()) }
