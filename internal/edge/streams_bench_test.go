//go:build integration

package edge

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fintech-bff/bff/internal/events"
	"github.com/fintech-bff/bff/internal/session"
	"github.com/fintech-bff/bff/internal/testing/poll"
)

// idleStreams is how many streams the stream benchmarks hold open: the
// issue's 10,000 on one instance.
const idleStreams = 10000

// BenchmarkIdleStreams holds idleStreams open event streams on one edge
// (real TCP: a child process holds the client ends, so this process counts
// only the server's) and reports what they cost at rest: heap and stack
// per stream after a GC, goroutines per stream, and the CPU the process
// spends per second while they idle (heartbeats every 15 s included: the
// idle window is 16 s), against the same edge without streams (8 s).
func BenchmarkIdleStreams(b *testing.B) {
	srv, sessions, hub := streamsServer(b, func(p events.Changes) events.Changes { return p }, nil, 0)
	token, _, err := sessions.Create(context.Background(), session.New{UserID: "stream-holder", Method: session.MethodDev})
	if err != nil {
		b.Fatal(err)
	}
	// The same edge at rest without streams: the baseline of the CPU.
	base0 := cpuNow()
	time.Sleep(8 * time.Second)
	base := cpuNow() - base0
	before, objs0 := memNow(), objects()
	g0 := runtime.NumGoroutine()
	stop := holdStreams(b, srv.Listener.Addr().String(), token, idleStreams)
	defer stop()
	waitStreams(b, hub, idleStreams)
	after, objs1 := memNow(), objects()
	g1 := runtime.NumGoroutine()
	cpu0 := cpuNow()
	time.Sleep(16 * time.Second)
	cpu := cpuNow() - cpu0
	b.ReportMetric(float64(after-before)/idleStreams, "B/stream")
	b.ReportMetric(float64(g1-g0)/idleStreams, "goroutines/stream")
	// What each collection marks for them.
	b.ReportMetric(float64(objs1-objs0)/idleStreams, "objects/stream")
	b.ReportMetric(float64(cpu.Microseconds())/16/1000, "cpu-ms/s-at-rest")
	b.ReportMetric(float64(base.Microseconds())/8/1000, "cpu-ms/s-without-streams")
	for range b.N {
	}
}

// BenchmarkSteadyStateRequestWithIdleStreams is BenchmarkSteadyStateRequest
// while idleStreams streams are open on the same edge: the GET path must
// not be slower for them (compare the two in one run).
func BenchmarkSteadyStateRequestWithIdleStreams(b *testing.B) {
	benchmarkSteadyStateWith(b, nil, idleStreams)
}

// BenchmarkSteadyStateRequestWithIdleSockets is the same GET with
// idleStreams plain idle TCP connections held open in the process instead
// of streams: what the sockets cost by themselves (the kernel's and the
// runtime's share), apart from what the streams add.
func BenchmarkSteadyStateRequestWithIdleSockets(b *testing.B) {
	benchmarkSteadyStateWith(b, nil, -idleStreams)
}

// holdSockets accepts n connections on a listener of its own and holds
// them, answering each with a status line (what holdStreams waits for).
func holdSockets(b *testing.B, n int) (stop func()) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	conns := make(chan net.Conn, n)
	go func() {
		for range n {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\n")
			conns <- c
		}
	}()
	stopChild := holdStreams(b, ln.Addr().String(), "none", n)
	if !poll.Within(2*time.Minute, func() bool { return len(conns) >= n }) {
		b.Fatalf("%d of %d sockets after 2 minutes", len(conns), n)
	}
	time.Sleep(time.Second)
	return func() {
		stopChild()
		ln.Close()
		close(conns)
		for c := range conns {
			c.Close()
		}
	}
}

// waitStreams waits until n streams are open and idle: the pusher has
// written what each was queued for when it opened, and a second more.
func waitStreams(b *testing.B, hub *events.Hub, n int) {
	if !poll.Within(2*time.Minute, func() bool { return hub.Count() >= n }) {
		b.Fatalf("%d of %d streams open after 2 minutes", hub.Count(), n)
	}
	time.Sleep(time.Second) // deliberate: the pusher's queued writes done, and a second more
}

// holdStreams starts a child process (this test binary) that opens n
// streams to addr with the session token and holds them until stop.
func holdStreams(b *testing.B, addr, token string, n int) (stop func()) {
	cmd := exec.Command(os.Args[0], "-test.run=^TestHoldStreamsProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), "BFF_HOLD_STREAMS="+addr+","+token+","+strconv.Itoa(n))
	cmd.Stderr = os.Stderr
	in, _ := cmd.StdinPipe()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	return func() { in.Close(); _ = cmd.Wait() }
}

// TestHoldStreamsProcess is the child of holdStreams: it does nothing
// unless BFF_HOLD_STREAMS names what to open (addr,token,n); then it opens
// the streams as raw connections (no goroutine each), reads each answer's
// status line, and holds them until its stdin closes.
func TestHoldStreamsProcess(t *testing.T) {
	spec := os.Getenv("BFF_HOLD_STREAMS")
	if spec == "" {
		return // not the child: nothing to hold
	}
	f := strings.Split(spec, ",")
	n, _ := strconv.Atoi(f[2])
	conns := make([]net.Conn, 0, n)
	for i := range n {
		c, err := net.Dial("tcp", f[0])
		if err != nil {
			t.Fatalf("stream %d: %v", i, err)
		}
		fmt.Fprintf(c, "GET /bff/events HTTP/1.1\r\nHost: bff.local\r\nAuthorization: Bearer %s\r\n\r\n", f[1])
		line, err := bufio.NewReader(c).ReadString('\n')
		if err != nil || !strings.Contains(line, " 200 ") {
			t.Fatalf("stream %d: got %q, %v", i, line, err)
		}
		conns = append(conns, c)
	}
	_, _ = io.Copy(io.Discard, os.Stdin)
	for _, c := range conns {
		c.Close()
	}
}

func memNow() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse + m.StackInuse
}

func objects() uint64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapObjects
}

func cpuNow() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
