package redistest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fintech-bff/bff/internal/testing/poll"
)

// maxWait bounds every wait for a server, a cluster or a failover.
const maxWait = 30 * time.Second

// Server is one redis-server process of a test's own: on a free loopback
// port, in a directory under t.TempDir(), with persistence off. It is killed
// when the test ends. Its methods are safe for concurrent use.
type Server struct {
	// Name tells the server apart in logs ("cluster-0", "master", ...).
	Name string
	// Addr is its host:port on 127.0.0.1.
	Addr string

	dir    string
	cmd    *exec.Cmd
	exited chan struct{} // closed once the process has been reaped
}

// serverBinary returns the path of redis-server, failing the test (never
// skipping it) when it is not installed.
func serverBinary(t testing.TB) string {
	t.Helper()
	if p, err := exec.LookPath("redis-server"); err == nil {
		return p
	}
	if _, err := os.Stat("/usr/bin/redis-server"); err == nil {
		return "/usr/bin/redis-server"
	}
	t.Fatalf("redis-server is not installed: the topology tests start their own; apt-get install -y redis-server")
	return ""
}

// freePort returns a loopback port nothing listens on right now. Another
// process may take it before redis-server binds it: startServer retries.
func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("finding a free port: %v", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// startServer starts redis-server with the arguments args returns for a
// port (and may pick more ports itself), waits until it answers PING, and
// kills it when t ends. A port taken in the meantime is retried with
// another; any other failure fails t with the server's log.
func startServer(t testing.TB, name string, args func(dir string, port int) []string) *Server {
	t.Helper()
	bin := serverBinary(t)
	dir := filepath.Join(t.TempDir(), name)
	var lastLog string
	for range 3 {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		port := freePort(t)
		s := &Server{Name: name, Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), dir: dir, exited: make(chan struct{})}
		logf, err := os.Create(s.logPath())
		if err != nil {
			t.Fatal(err)
		}
		s.cmd = exec.Command(bin, args(dir, port)...)
		s.cmd.Dir = dir
		s.cmd.Stdout, s.cmd.Stderr = logf, logf
		s.cmd.SysProcAttr = sysProcAttr()
		if err := s.cmd.Start(); err != nil {
			logf.Close()
			t.Fatalf("starting %s: %v", name, err)
		}
		go func() {
			_ = s.cmd.Wait()
			logf.Close()
			close(s.exited)
		}()
		t.Cleanup(s.Kill)
		err = s.waitPing()
		if err == nil {
			return s
		}
		s.Kill()
		lastLog = s.Log()
		if !strings.Contains(lastLog, "Address already in use") {
			t.Fatalf("%s did not start: %v\n%s", name, err, lastLog)
		}
	}
	t.Fatalf("%s did not start: its ports were taken three times\n%s", name, lastLog)
	return nil
}

func (s *Server) logPath() string { return filepath.Join(s.dir, "redis.log") }

// waitPing waits until the server answers PING, it exits, or maxWait.
func (s *Server) waitPing() error {
	c := redis.NewClient(&redis.Options{Addr: s.Addr, DialTimeout: 200 * time.Millisecond, MaxRetries: -1})
	defer c.Close()
	var err error
	exited := false
	if poll.Within(maxWait, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if err = c.Ping(ctx).Err(); err == nil {
			return true
		}
		select {
		case <-s.exited:
			exited = true
		default:
		}
		return exited
	}) && !exited {
		return nil
	}
	if exited {
		return fmt.Errorf("exited: %v", s.cmd.ProcessState)
	}
	return fmt.Errorf("no PONG within %v: %v", maxWait, err)
}

// Kill stops the process at once (SIGKILL: no shutdown, no last words to
// replicas) and waits until it is reaped. Killing a dead server is a no-op.
func (s *Server) Kill() {
	select {
	case <-s.exited:
		return
	default:
	}
	_ = s.cmd.Process.Kill()
	<-s.exited
}

// Restart kills the server and starts it again on the same address with
// the same arguments: for a server without persistence, every key is gone,
// as after a crash of a Redis run without AOF.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	s.Kill()
	logf, err := os.OpenFile(s.logPath(), os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(s.cmd.Path, s.cmd.Args[1:]...)
	cmd.Dir = s.cmd.Dir
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		logf.Close()
		t.Fatalf("restarting %s: %v", s.Name, err)
	}
	s.cmd, s.exited = cmd, make(chan struct{})
	exited := s.exited
	go func() {
		_ = cmd.Wait()
		logf.Close()
		close(exited)
	}()
	if err := s.waitPing(); err != nil {
		t.Fatalf("%s did not come back: %v\n%s", s.Name, err, s.Log())
	}
}

// Pid is the server's process id.
func (s *Server) Pid() int { return s.cmd.Process.Pid }

// Client returns a plain client to this one server; the caller closes it.
func (s *Server) Client() *redis.Client {
	return redis.NewClient(&redis.Options{Addr: s.Addr, DialTimeout: time.Second, MaxRetries: -1})
}

// Log returns the last lines of the server's log.
func (s *Server) Log() string {
	b, err := os.ReadFile(s.logPath())
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > 40 {
		lines = lines[len(lines)-40:]
	}
	return strings.Join(lines, "\n")
}

// StartServer starts a standalone redis-server on a free loopback port
// (retrying should another process take the port first) and returns once
// it answers PING. It is killed when the test ends; tests that need Redis
// to vanish call Kill.
func StartServer(t testing.TB) *Server {
	t.Helper()
	return startServer(t, "standalone", dataArgs)
}

// logs joins the logs of servers, each under its name, for failure messages.
func logs(servers ...*Server) string {
	var b strings.Builder
	for _, s := range servers {
		fmt.Fprintf(&b, "--- %s (%s) log:\n%s\n", s.Name, s.Addr, s.Log())
	}
	return b.String()
}

// dataArgs are the arguments every data node starts with: loopback only,
// no persistence, logs to stdout (the log file).
func dataArgs(dir string, port int) []string {
	return []string{
		"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", dir,
		"--save", "", "--appendonly", "no", "--logfile", "", "--daemonize", "no",
		// A master waits this long for more replicas before a diskless full
		// sync (5s by default): the replica would take 5s to come up.
		"--repl-diskless-sync-delay", "0",
	}
}

// waitUntil polls cond until it reports true, for at most maxWait, and
// then fails t with what, cond's last error and logs.
func waitUntil(t testing.TB, what string, logs func() string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	var lastErr error
	if !poll.Within(maxWait, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		ok, err := cond(ctx)
		lastErr = err
		return ok
	}) {
		t.Fatalf("%s: not within %v (last error: %v)\n%s", what, maxWait, lastErr, logs())
	}
}

// Cluster is a Redis Cluster of masters only (no replicas), each node a
// Server of its own.
type Cluster struct {
	Nodes []*Server
}

// StartCluster starts a Redis Cluster of n masters (at least 3, as
// redis-cli --cluster create requires), spreads the 16384 slots over them
// and waits until every node reports cluster_state:ok. Everything is
// killed when t ends.
func StartCluster(t testing.TB, n int) *Cluster {
	t.Helper()
	if n < 3 {
		t.Fatalf("StartCluster(%d): a Redis Cluster needs at least 3 masters", n)
	}
	c := &Cluster{Nodes: make([]*Server, n)}
	for i := range n {
		c.Nodes[i] = startServer(t, fmt.Sprintf("cluster-%d", i), func(dir string, port int) []string {
			return append(dataArgs(dir, port),
				"--cluster-enabled", "yes", "--cluster-config-file", filepath.Join(dir, "nodes.conf"),
				// A short node timeout makes the nodes gossip more often, so
				// redis-cli sees them agree sooner (it polls once a second).
				"--cluster-port", strconv.Itoa(freePort(t)), "--cluster-node-timeout", "2000")
		})
	}
	ctx, cancel := context.WithTimeout(context.Background(), maxWait)
	defer cancel()
	args := append([]string{"--cluster", "create"}, c.Addrs()...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	out, err := exec.CommandContext(ctx, cliBinary(t), args...).CombinedOutput()
	if err != nil {
		t.Fatalf("redis-cli --cluster create: %v\n%s\n%s", err, out, c.Logs())
	}
	for _, s := range c.Nodes {
		cl := s.Client()
		waitUntil(t, s.Name+" reports cluster_state:ok", c.Logs, func(ctx context.Context) (bool, error) {
			info, err := cl.ClusterInfo(ctx).Result()
			return strings.Contains(info, "cluster_state:ok"), err
		})
		_ = cl.Close()
	}
	return c
}

func cliBinary(t testing.TB) string {
	t.Helper()
	p, err := exec.LookPath("redis-cli")
	if err != nil {
		t.Fatalf("redis-cli is not installed: apt-get install -y redis-server (it ships redis-cli)")
	}
	return p
}

// Addrs are the nodes' addresses, the seeds for a cluster client.
func (c *Cluster) Addrs() []string {
	out := make([]string, len(c.Nodes))
	for i, s := range c.Nodes {
		out[i] = s.Addr
	}
	return out
}

// Logs returns the last lines of every node's log.
func (c *Cluster) Logs() string { return logs(c.Nodes...) }

// Sentinel is a master, one replica of it, and one Sentinel watching them
// under MasterName with quorum 1, a 1s down-after and a 5s failover
// timeout: a failover takes a few seconds.
type Sentinel struct {
	MasterName string

	mu       sync.Mutex
	master   *Server // the current master
	replica  *Server // its replica; nil once promoted
	sentinel *Server
	killed   []*Server
	killedAt time.Time
}

// StartSentinel starts the master, its replica and the Sentinel, and waits
// until the replica is in sync and the Sentinel knows both (so it can fail
// over at once). Everything is killed when t ends.
func StartSentinel(t testing.TB) *Sentinel {
	t.Helper()
	s := &Sentinel{MasterName: "mymaster"}
	s.master = startServer(t, "master", dataArgs)
	s.replica = startServer(t, "replica", func(dir string, port int) []string {
		host, mport, _ := net.SplitHostPort(s.master.Addr)
		return append(dataArgs(dir, port), "--replicaof", host, mport)
	})
	s.sentinel = startServer(t, "sentinel", func(dir string, port int) []string {
		host, mport, _ := net.SplitHostPort(s.master.Addr)
		conf := filepath.Join(dir, "sentinel.conf") // Sentinel rewrites it: it must be its own
		body := fmt.Sprintf(`port %d
bind 127.0.0.1
dir %s
logfile ""
sentinel monitor %s %s %s 1
sentinel down-after-milliseconds %[3]s 1000
sentinel failover-timeout %[3]s 5000
sentinel parallel-syncs %[3]s 1
`, port, dir, s.MasterName, host, mport)
		if err := os.WriteFile(conf, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return []string{conf, "--sentinel"}
	})

	rc := s.replica.Client()
	defer rc.Close()
	waitUntil(t, "the replica syncs with the master", s.Logs, func(ctx context.Context) (bool, error) {
		info, err := rc.Info(ctx, "replication").Result()
		return strings.Contains(info, "master_link_status:up"), err
	})
	sc := redis.NewSentinelClient(&redis.Options{Addr: s.sentinel.Addr, DialTimeout: time.Second})
	defer sc.Close()
	waitUntil(t, "the Sentinel knows the master and a healthy replica", s.Logs, func(ctx context.Context) (bool, error) {
		replicas, err := sc.Replicas(ctx, s.MasterName).Result()
		if err != nil {
			return false, err
		}
		for _, r := range replicas {
			if net.JoinHostPort(r["ip"], r["port"]) == s.replica.Addr && r["flags"] == "slave" &&
				r["master-link-status"] == "ok" {
				return true, nil
			}
		}
		return false, fmt.Errorf("replicas: %v", replicas)
	})
	return s
}

// SentinelAddrs are the Sentinels' addresses, for a failover client.
func (s *Sentinel) SentinelAddrs() []string { return []string{s.sentinel.Addr} }

// WaitReplicated waits (at most a second) until the replica has every
// write the master had acknowledged, so a failover loses nothing. A WAIT is
// about its own connection's writes, so it writes a marker first on the
// same connection: the replication stream is ordered, and every earlier
// acknowledged write precedes the marker in it.
func (s *Sentinel) WaitReplicated(t testing.TB) {
	t.Helper()
	s.mu.Lock()
	master := s.master
	s.mu.Unlock()
	c := master.Client()
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn := c.Conn()
	defer conn.Close()
	if err := conn.Set(ctx, "redistest:replication-marker", time.Now().String(), time.Minute).Err(); err != nil {
		t.Fatalf("marker write on the master: %v\n%s", err, s.Logs())
	}
	n, err := conn.Wait(ctx, 1, time.Second).Result()
	if err != nil || n < 1 {
		t.Fatalf("WAIT 1 1000: got %d replicas, %v; want 1\n%s", n, err, s.Logs())
	}
}

// KillMaster kills the master process (SIGKILL) and returns when it is
// dead; the Sentinel notices after down-after-milliseconds and promotes
// the replica. Call WaitReplicated first not to lose recent writes.
func (s *Sentinel) KillMaster(t testing.TB) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.replica == nil {
		t.Fatal("KillMaster: there is no replica left to promote")
	}
	s.master.Kill()
	s.killed = append(s.killed, s.master)
	s.killedAt = time.Now()
}

// WaitFailover waits (at most 30s) until the Sentinel names the former
// replica as the master and that server answers as one, and returns the
// time since KillMaster.
func (s *Sentinel) WaitFailover(t testing.TB) time.Duration {
	t.Helper()
	s.mu.Lock()
	replica, killedAt := s.replica, s.killedAt
	s.mu.Unlock()
	if replica == nil {
		return 0 // already promoted
	}
	sc := redis.NewSentinelClient(&redis.Options{Addr: s.sentinel.Addr, DialTimeout: time.Second})
	defer sc.Close()
	rc := replica.Client()
	defer rc.Close()
	waitUntil(t, "the Sentinel promotes the replica", s.Logs, func(ctx context.Context) (bool, error) {
		addr, err := sc.GetMasterAddrByName(ctx, s.MasterName).Result()
		if err != nil {
			return false, err
		}
		if got := net.JoinHostPort(addr[0], addr[1]); got != replica.Addr {
			return false, fmt.Errorf("the Sentinel names %s", got)
		}
		info, err := rc.Info(ctx, "replication").Result()
		if err != nil {
			return false, err
		}
		return strings.Contains(info, "role:master"), errors.New("the replica is not a master yet")
	})
	s.mu.Lock()
	defer s.mu.Unlock()
	s.master, s.replica = replica, nil
	return time.Since(killedAt)
}

// Servers are every process of the setup, killed ones included.
func (s *Sentinel) Servers() []*Server {
	s.mu.Lock()
	defer s.mu.Unlock()
	servers := append([]*Server{}, s.killed...)
	for _, x := range []*Server{s.master, s.replica, s.sentinel} {
		if x != nil && !slices.Contains(servers, x) {
			servers = append(servers, x)
		}
	}
	return servers
}

// Logs returns the last lines of every server's log, killed ones included.
func (s *Sentinel) Logs() string { return logs(s.Servers()...) }
