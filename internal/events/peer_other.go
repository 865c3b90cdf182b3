//go:build !linux

package events

import "net"

// bare keeps the connection as it is here: the pusher writes it with
// deadlines, and a goroutine blocked in a one-byte read sees the client
// leave (Pusher.add). The fd functions are then never called.
func bare(net.Conn) (int, bool) { return -1, false }

func fdWrite(int, []byte) error { return nil }
func fdClose(int)               {}
func fdGone(int) bool           { return false }
func fdShutdown(int)            {}
