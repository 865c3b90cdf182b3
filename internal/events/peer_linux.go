package events

import (
	"errors"
	"net"
	"syscall"
)

// On Linux an idle stream is a bare socket: once its catch-up is written,
// its descriptor is duplicated, set non-blocking and kept as an int, and
// the net.Conn is closed (the socket stays open through the duplicate).
// The runtime then holds nothing of it (no poller entry, no connection
// object for the garbage collector to mark), and the pusher writes it with
// write(2) and looks at it with a non-blocking peek. The edge's
// BenchmarkSteadyStateRequestWithIdleStreams is why: every object a stream
// keeps is marked by every collection the requests' garbage causes, so the
// GET path paid for the idle streams.

// bare turns a taken connection into a bare descriptor; false (and conn
// untouched) when it cannot.
func bare(conn net.Conn) (int, bool) {
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return -1, false
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return -1, false
	}
	nfd, derr := -1, error(nil)
	if err := raw.Control(func(fd uintptr) { nfd, derr = syscall.Dup(int(fd)) }); err != nil || derr != nil {
		return -1, false
	}
	syscall.CloseOnExec(nfd)
	if err := syscall.SetNonblock(nfd, true); err != nil {
		_ = syscall.Close(nfd)
		return -1, false
	}
	_ = conn.Close() // the duplicate keeps the socket open
	return nfd, true
}

// errStalled: the client's socket buffer is full; it reads nothing.
var errStalled = errors.New("the client reads nothing")

// fdWrite writes b whole or fails: it never waits. A healthy client keeps
// its socket buffer (hundreds of KiB) far from full with events and
// heartbeats of a few hundred bytes; one that let it fill loses its
// stream, reconnects and resumes from the last whole event it read.
func fdWrite(fd int, b []byte) error {
	for len(b) > 0 {
		n, err := syscall.Write(fd, b)
		switch {
		case err == syscall.EINTR:
			continue
		case err == syscall.EAGAIN:
			return errStalled
		case err != nil:
			return err
		}
		b = b[n:]
	}
	return nil
}

func fdClose(fd int) { _ = syscall.Close(fd) }

// fdGone reports whether the client has closed its side, or the socket
// failed, without blocking: a peek of one byte. A client sends nothing
// after its request; should it, the stream ends too.
func fdGone(fd int) bool {
	var b [1]byte
	for {
		n, _, err := syscall.Recvfrom(fd, b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		switch {
		case err == syscall.EINTR:
			continue
		case err == syscall.EAGAIN:
			return false
		case err != nil, n == 0:
			return true
		}
		return true
	}
}

// fdShutdown makes every later write of the socket fail and tells the
// client the stream ended (FIN), without closing the descriptor, whose
// number must not be reused before its writer closes it.
func fdShutdown(fd int) { _ = syscall.Shutdown(fd, syscall.SHUT_RDWR) }
