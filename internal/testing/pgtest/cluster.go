package pgtest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/fintech-bff/bff/internal/testing/poll"
)

// The private clusters below are for fault tests: PostgreSQL processes of
// the test's own, which it may pause, restart, crash and fail over without
// touching the machine's server.
//
// PostgreSQL refuses to run as root, and CI runs as root: then every
// PostgreSQL program runs as the postgres OS user (its credentials set on
// the process), in a temporary directory that user owns. The programs are
// found in BFF_TEST_POSTGRES_BIN, else the newest /usr/lib/postgresql/*/bin,
// else on PATH; a test that needs them fails, never skips, without them.
//
// Every wait is bounded, and t.Cleanup stops the servers and removes their
// directories. A cluster's postmaster dies with the test process
// (Pdeathsig), so a killed test run leaves no server behind.

// Replication is how a Pair's primary waits for its standby.
type Replication int

const (
	// Synchronous: the primary names the standby in
	// synchronous_standby_names with synchronous_commit = on, so a commit
	// returns only once the standby has flushed its WAL: a failover to it
	// loses no committed transaction.
	Synchronous Replication = iota + 1
	// Asynchronous: the standby streams but nobody waits for it: a commit
	// returns once it is on the primary's disk, and a failover loses what
	// the standby had not received yet.
	Asynchronous
)

func (r Replication) String() string {
	switch r {
	case Synchronous:
		return "synchronous"
	case Asynchronous:
		return "asynchronous"
	}
	return "Replication(" + strconv.Itoa(int(r)) + ")"
}

// StandbyName is the standby's cluster_name, so its application_name in
// the primary's pg_stat_replication and synchronous_standby_names.
const StandbyName = "standby"

// ServerOptions configures StartServer and StartPair.
type ServerOptions struct {
	// Fsync turns fsync on. Off by default: startup and commits are faster,
	// and a test loses nothing by it as long as it never crashes the
	// machine (a killed PostgreSQL loses nothing that reached the kernel).
	// Turn it on where what the server reports about its durability is
	// what the test shows (a check that refuses fsync = off).
	Fsync bool
}

// Server is one private PostgreSQL server (a postmaster and its children).
type Server struct {
	t       testing.TB
	name    string
	root    string // the cluster's temporary directory
	dir     string // the data directory
	logPath string
	port    int
	extra   []string // -c settings of this server's command line
	bin     string
	cred    *syscall.Credential
	mu      sync.Mutex
	cmd     *exec.Cmd
	exited  chan struct{} // closed when cmd has exited
}

// Pair is a primary and a standby streaming from it (pg_basebackup -R).
type Pair struct {
	Primary, Standby *Server
	Replication      Replication
}

// StartServer starts a lone private server on a free loopback port.
func StartServer(t testing.TB, o ServerOptions) *Server {
	t.Helper()
	c := newCluster(t)
	s := c.initdb(t, "primary", o)
	s.start(t)
	return s
}

// StartPair starts a primary and a standby streaming from it, replicating
// as r says, and waits until the standby streams (and, when synchronous,
// is the synchronous one).
func StartPair(t testing.TB, r Replication, o ServerOptions) *Pair {
	t.Helper()
	if r != Synchronous && r != Asynchronous {
		t.Fatalf("pgtest.StartPair: replication %v", r)
	}
	c := newCluster(t)
	p := c.initdb(t, "primary", o)
	if r == Synchronous {
		// On the primary's command line, not in postgresql.conf: the
		// standby copies that file, and once promoted it must not wait for
		// a standby of its own.
		p.extra = append(p.extra, "-c", "synchronous_standby_names=FIRST 1 ("+StandbyName+")")
	}
	p.start(t)
	s := c.basebackup(t, p, StandbyName)
	s.start(t)
	pair := &Pair{Primary: p, Standby: s, Replication: r}
	want := "async"
	if r == Synchronous {
		want = "sync"
	}
	pair.waitStandby(t, want)
	return pair
}

// URL is the multi-host URL of the pair's database postgres: the primary
// first, then the standby, and target_session_attrs=read-write, so a client
// connects to whichever accepts writes: the standby once promoted.
func (p *Pair) URL() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d,127.0.0.1:%d/postgres?sslmode=disable&target_session_attrs=read-write",
		p.Primary.port, p.Standby.port)
}

// URL is the server's database postgres, as the postgres user (trust).
func (s *Server) URL() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", s.port)
}

// Port is the server's loopback port.
func (s *Server) Port() int { return s.port }

// Name is the server's cluster_name.
func (s *Server) Name() string { return s.name }

// cluster is the temporary directory of a test's servers.
type cluster struct {
	root string
	bin  string
	cred *syscall.Credential
}

func newCluster(t testing.TB) *cluster {
	t.Helper()
	bin, err := binDir()
	if err != nil {
		t.Fatal(err)
	}
	cred, err := runAs()
	if err != nil {
		t.Fatal(err)
	}
	// Not t.TempDir: its parents are the test user's, closed to postgres.
	root, err := os.MkdirTemp("", "bff-pgtest-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(root) })
	if cred != nil {
		if err := os.Chown(root, int(cred.Uid), int(cred.Gid)); err != nil {
			t.Fatal(err)
		}
	}
	return &cluster{root: root, bin: bin, cred: cred}
}

// binDir finds PostgreSQL's programs.
func binDir() (string, error) {
	has := func(dir string) bool {
		for _, p := range []string{"postgres", "initdb", "pg_basebackup"} {
			if _, err := os.Stat(filepath.Join(dir, p)); err != nil {
				return false
			}
		}
		return true
	}
	if d := os.Getenv("BFF_TEST_POSTGRES_BIN"); d != "" {
		if has(d) {
			return d, nil
		}
		return "", fmt.Errorf("BFF_TEST_POSTGRES_BIN=%s lacks postgres, initdb or pg_basebackup", d)
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { // newest major version first
		return version(dirs[i]) > version(dirs[j])
	})
	for _, d := range dirs {
		if has(d) {
			return d, nil
		}
	}
	if p, err := exec.LookPath("initdb"); err == nil && has(filepath.Dir(p)) {
		return filepath.Dir(p), nil
	}
	return "", errors.New("PostgreSQL's server programs (postgres, initdb, pg_basebackup) are needed for this test and were not found " +
		"in BFF_TEST_POSTGRES_BIN, /usr/lib/postgresql/*/bin or PATH: install them (Debian/Ubuntu: apt-get install -y postgresql)")
}

func version(binDir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return n
}

// runAs is the postgres OS user's credentials when the test runs as root
// (PostgreSQL refuses root), else nil: the programs run as the test's user.
func runAs() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("the test runs as root, and PostgreSQL must run as another user: the postgres OS user is needed (%v)", err)
	}
	uid, _ := strconv.ParseUint(u.Uid, 10, 32)
	gid, _ := strconv.ParseUint(u.Gid, 10, 32)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), NoSetGroups: true}, nil
}

// run runs one of PostgreSQL's programs to its end, within limit.
func (c *cluster) run(t testing.TB, limit time.Duration, prog string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(c.bin, prog), args...)
	cmd.Dir = c.root
	cmd.Env = []string{"PATH=" + c.bin + ":/usr/bin:/bin", "LC_ALL=C", "PGCONNECT_TIMEOUT=5"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred, Pdeathsig: syscall.SIGKILL}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v (after %v at most)\n%s", prog, strings.Join(args, " "), err, limit, out)
	}
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// conf is what every private server runs with, appended to the
// postgresql.conf initdb writes (a standby copies it).
func conf(o ServerOptions) string {
	fsync := "off"
	if o.Fsync {
		fsync = "on"
	}
	return `
# pgtest: a private server for fault tests
listen_addresses = '127.0.0.1'
unix_socket_directories = ''
fsync = ` + fsync + `
synchronous_commit = on
full_page_writes = on
wal_level = replica
max_wal_senders = 4
max_replication_slots = 4
wal_keep_size = '128MB'
hot_standby = on
wal_retrieve_retry_interval = '500ms'
max_connections = 50
shared_buffers = '16MB'
log_line_prefix = '%m [%p] %b '
`
}

func (c *cluster) server(name string) *Server {
	return &Server{
		name: name, root: c.root, dir: filepath.Join(c.root, name), logPath: filepath.Join(c.root, name+".log"),
		bin: c.bin, cred: c.cred,
	}
}

func (c *cluster) initdb(t testing.TB, name string, o ServerOptions) *Server {
	t.Helper()
	s := c.server(name)
	c.run(t, time.Minute, "initdb", "-D", s.dir, "-U", "postgres", "--auth=trust", "--no-sync", "-E", "UTF8", "--locale=C", "--no-instructions")
	f, err := os.OpenFile(filepath.Join(s.dir, "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(conf(o)); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return s
}

// basebackup makes a standby of p: a copy of its data directory that
// streams from it (standby.signal and primary_conninfo, by -R).
func (c *cluster) basebackup(t testing.TB, p *Server, name string) *Server {
	t.Helper()
	s := c.server(name)
	c.run(t, time.Minute, "pg_basebackup", "-h", "127.0.0.1", "-p", strconv.Itoa(p.port), "-U", "postgres",
		"-D", s.dir, "-R", "-X", "stream", "-c", "fast", "--no-sync")
	return s
}

// start starts the postmaster (on a new free port the first time, on the
// same one after) and waits until it accepts connections.
func (s *Server) start(t testing.TB) {
	t.Helper()
	first := s.t == nil
	if first {
		s.t = t
		s.port = freePort(t)
	}
	logf, err := os.OpenFile(s.logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	args := append([]string{"-D", s.dir, "-p", strconv.Itoa(s.port), "-c", "cluster_name=" + s.name}, s.extra...)
	cmd := exec.Command(filepath.Join(s.bin, "postgres"), args...)
	cmd.Dir = s.root
	cmd.Env = []string{"PATH=/usr/bin:/bin", "LC_ALL=C"}
	cmd.Stdout, cmd.Stderr = logf, logf
	// Its own process group, so a signal to the test's group does not
	// reach it; and it dies with the test process.
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred, Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		t.Fatalf("starting %s: %v", s.name, err)
	}
	logf.Close()
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	s.mu.Lock()
	s.cmd, s.exited = cmd, exited
	s.mu.Unlock()
	if first {
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("%s's log (the end):\n%s", s.name, s.logTail(60))
			}
			s.stop(15 * time.Second)
			s.removeSharedMemory()
		})
	}
	if err := s.waitReady(30 * time.Second); err != nil {
		t.Fatalf("%s did not start: %v\n%s", s.name, err, s.logTail(30))
	}
}

// waitReady waits until the server answers a query.
func (s *Server) waitReady(limit time.Duration) error {
	var err error
	exited := false
	if poll.Within(limit, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		var c *pgx.Conn
		if c, err = pgx.Connect(ctx, s.URL()); err == nil {
			err = c.Ping(ctx)
			_ = c.Close(ctx)
		}
		if err == nil {
			return true
		}
		select {
		case <-s.exitedChan():
			exited = true
		default:
		}
		return exited
	}) && !exited {
		return nil
	}
	if exited {
		return errors.New("the postmaster exited")
	}
	return fmt.Errorf("no answer within %v: %w", limit, err)
}

func (s *Server) exitedChan() chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.exited
}

func (s *Server) running() bool {
	select {
	case <-s.exitedChan():
		return false
	default:
		return true
	}
}

// processes is the postmaster's pid and its children's, postmaster first.
func (s *Server) processes() []int {
	s.mu.Lock()
	pm := s.cmd.Process.Pid
	s.mu.Unlock()
	return append([]int{pm}, children(pm)...)
}

// children lists the processes whose parent is pid (from /proc).
func children(pid int) []int {
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid …: comm may hold spaces and parentheses.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) > 1 && f[1] == strconv.Itoa(pid) {
			out = append(out, p)
		}
	}
	return out
}

// freeze stops (SIGSTOP) the postmaster, then each of its children,
// listed once it is stopped so that it forks none after, and returns them
// all, postmaster first. Every postmaster child leads a process group of
// its own (setsid), so one signal to the postmaster's group would reach
// only the postmaster.
func (s *Server) freeze() []int {
	s.mu.Lock()
	pm := s.cmd.Process.Pid
	s.mu.Unlock()
	_ = syscall.Kill(pm, syscall.SIGSTOP)
	// Bounded and not checked: the children are listed and stopped anyway.
	poll.Within(time.Second, func() bool { return stopped(pm) })
	kids := children(pm)
	for _, p := range kids {
		_ = syscall.Kill(p, syscall.SIGSTOP)
	}
	return append([]int{pm}, kids...)
}

// stopped reports whether pid is in the stopped state (or gone).
func stopped(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	i := bytes.LastIndexByte(b, ')')
	f := strings.Fields(string(b[i+1:]))
	return len(f) > 0 && (f[0] == "T" || f[0] == "t" || f[0] == "Z")
}

// Pause freezes the server as a stopped virtual machine would be: SIGSTOP
// to the postmaster and every child. Its connections stay open and its
// port keeps accepting TCP connections, and nothing answers.
func (s *Server) Pause() {
	s.t.Helper()
	s.freeze()
}

// Resume undoes Pause.
func (s *Server) Resume() {
	s.t.Helper()
	pids := s.processes()
	for _, p := range pids[1:] {
		_ = syscall.Kill(p, syscall.SIGCONT)
	}
	_ = syscall.Kill(pids[0], syscall.SIGCONT)
}

// Restart stops the server fast (its sessions are ended, a shutdown
// checkpoint written) and starts it again on the same port, waiting until
// it answers.
func (s *Server) Restart() {
	s.t.Helper()
	if err := s.stop(30 * time.Second); err != nil {
		s.t.Fatalf("stopping %s: %v", s.name, err)
	}
	s.start(s.t)
}

// Stop stops the server fast (SIGINT, PostgreSQL's fast shutdown), and
// kills it when it has not stopped within 15 s.
func (s *Server) Stop() {
	s.t.Helper()
	if err := s.stop(15 * time.Second); err != nil {
		s.t.Errorf("stopping %s: %v", s.name, err)
	}
}

// Crash kills the postmaster and its children at once (SIGKILL): the
// machine died. What was committed is in the data directory, what the
// standby had not received yet is nowhere else.
func (s *Server) Crash() {
	s.t.Helper()
	if !s.running() {
		return
	}
	s.kill()
}

// kill freezes the server, so nothing forks or writes from then on, and
// kills every process of it (a killed postmaster's children would live on,
// reparented, with their connections open), and waits for the postmaster.
func (s *Server) kill() {
	for _, p := range s.freeze() {
		_ = syscall.Kill(p, syscall.SIGKILL)
	}
	<-s.exitedChan()
}

func (s *Server) stop(limit time.Duration) error {
	if s.cmd == nil || !s.running() {
		return nil
	}
	// Continue what Pause or HoldWALSenders stopped: PostgreSQL's fast
	// shutdown waits for the WAL senders to send what they have.
	s.Resume()
	_ = syscall.Kill(s.processes()[0], syscall.SIGINT)
	select {
	case <-s.exitedChan():
		return nil
	case <-time.After(limit):
	}
	s.kill()
	return fmt.Errorf("%s did not shut down within %v and was killed", s.name, limit)
}

// removeSharedMemory removes the System V segment a killed postmaster
// leaves behind (postmaster.pid's seventh line: key and id). A server
// stopped cleanly has removed it and postmaster.pid with it.
func (s *Server) removeSharedMemory() {
	b, err := os.ReadFile(filepath.Join(s.dir, "postmaster.pid"))
	if err != nil {
		return
	}
	lines := strings.Split(string(b), "\n")
	if len(lines) < 7 {
		return
	}
	f := strings.Fields(lines[6])
	if len(f) != 2 {
		return
	}
	if _, err := strconv.Atoi(f[1]); err == nil {
		_ = exec.Command("ipcrm", "-m", f[1]).Run()
	}
}

// Promote ends the standby's recovery (pg_promote, waiting up to 30 s):
// from then on it accepts writes.
func (s *Server) Promote() {
	s.t.Helper()
	var ok bool
	if err := s.QueryRow(40*time.Second, "SELECT pg_promote(true, 30)", &ok); err != nil || !ok {
		s.t.Fatalf("promoting %s: %v (promoted: %v)\n%s", s.name, err, ok, s.logTail(20))
	}
}

// QueryRow runs one query on the server's database postgres, within limit,
// and scans its one row into dest.
func (s *Server) QueryRow(limit time.Duration, sql string, dest ...any) error {
	return s.queryRowArgs(limit, sql, nil, dest...)
}

// WaitReplayed waits until every standby of the primary s has replayed the
// WAL s had written when it was called.
func (s *Server) WaitReplayed(limit time.Duration) {
	s.t.Helper()
	var target string
	if err := s.QueryRow(5*time.Second, "SELECT pg_current_wal_lsn()::text", &target); err != nil {
		s.t.Fatalf("%s: %v", s.name, err)
	}
	if !poll.Within(limit, func() bool {
		var behind, standbys int
		err := s.queryRowArgs(5*time.Second, `SELECT count(*) FILTER (WHERE replay_lsn IS NULL OR replay_lsn < $1::pg_lsn), count(*) FROM pg_stat_replication`,
			[]any{target}, &behind, &standbys)
		return err == nil && standbys > 0 && behind == 0
	}) {
		s.t.Fatalf("%s: the standby had not replayed up to %s within %v", s.name, target, limit)
	}
}

func (s *Server) queryRowArgs(limit time.Duration, sql string, args []any, dest ...any) error {
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	c, err := pgx.Connect(ctx, s.URL())
	if err != nil {
		return err
	}
	defer c.Close(context.Background())
	return c.QueryRow(ctx, sql, args...).Scan(dest...)
}

// HoldWALSenders stops (SIGSTOP) the primary's WAL senders, so that what
// is committed from now on does not reach the standby: the standby lags,
// as one behind a slow or broken network does. On an asynchronous primary
// commits go on returning; on a synchronous one they wait. release
// continues them. (Pausing the standby's WAL receiver instead would hold
// the WAL in its socket buffer, and a promotion waits for the receiver to
// exit, which a stopped one never does.)
func (s *Server) HoldWALSenders() (release func()) {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, s.URL())
	if err != nil {
		s.t.Fatalf("%s: %v", s.name, err)
	}
	defer c.Close(context.Background())
	rows, err := c.Query(ctx, "SELECT pid FROM pg_stat_replication")
	if err != nil {
		s.t.Fatalf("%s: %v", s.name, err)
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil || len(pids) == 0 {
		s.t.Fatalf("%s: no WAL sender to hold (%v)", s.name, err)
	}
	for _, p := range pids {
		if err := syscall.Kill(int(p), syscall.SIGSTOP); err != nil {
			s.t.Fatalf("%s: stopping WAL sender %d: %v", s.name, p, err)
		}
	}
	return func() {
		for _, p := range pids {
			_ = syscall.Kill(int(p), syscall.SIGCONT)
		}
	}
}

// waitStandby waits until the primary lists the standby as streaming with
// sync_state want.
func (p *Pair) waitStandby(t testing.TB, want string) {
	t.Helper()
	var err error
	if !poll.Within(30*time.Second, func() bool {
		var n int
		err = p.Primary.queryRowArgs(5*time.Second,
			`SELECT count(*) FROM pg_stat_replication WHERE application_name = $1 AND state = 'streaming' AND sync_state = $2`,
			[]any{StandbyName, want}, &n)
		return err == nil && n == 1
	}) {
		t.Fatalf("the standby is not streaming (%s) within 30 s: %v\n%s\n%s", want, err, p.Primary.logTail(20), p.Standby.logTail(20))
	}
}

// logTail is the last n lines of the server's log.
func (s *Server) logTail(n int) string {
	f, err := os.Open(s.logPath)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if len(lines) > n {
			lines = lines[1:]
		}
	}
	return strings.Join(lines, "\n")
}
