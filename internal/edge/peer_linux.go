package edge

import (
	"net"
	"syscall"
)

// peerGone reports whether the client of conn has closed its side (or
// the connection failed), without blocking and without a goroutine: a
// non-blocking peek of one byte. The pusher's scan asks it of every
// stream, so a client that leaves gives its socket back within
// peerCheckEvery instead of at the next heartbeat's failed write; a
// goroutine blocked in a read per stream would tell at once, at the price
// of a stack each for the garbage collector to scan
// (BenchmarkSteadyStateRequestWithIdleStreams measured both).
func peerGone(conn net.Conn) bool {
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return false
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return true
	}
	gone := false
	var b [1]byte
	err = raw.Read(func(fd uintptr) bool {
		n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		switch {
		case err == syscall.EAGAIN || err == syscall.EINTR:
		case err != nil || n == 0:
			gone = true // an error, or the end of the stream
		default:
			gone = true // a client sends nothing after its request
		}
		return true // never wait: this is a look, not a read
	})
	return gone || err != nil
}

// peerWatched: on Linux the scan peeks (peerGone); no goroutine per stream.
const peerWatched = false
