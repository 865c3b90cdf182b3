package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "native:", err)
		if errors.Is(err, errUsage) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

// errUsage marks a command line the app cannot read; its usage has been
// printed.
var errUsage = errors.New("usage")

const usage = `native: a stand-in for a mobile app of the BFF, with a device-bound
session (DPoP, RFC 9449). docs/native-apps.md explains each step.

usage: native [-bff URL] [-dir DIR] COMMAND [flags] [args]

  login [-dev-user ID | -redirect-uri URI [-open]]
                            log in (the system browser, or the dev login)
  call [-X METHOD] [-d JSON] [-idempotency-key KEY] PATH
                            one request, such as call /api/v2/data/accounts
  pay [-key KEY] [-creditor NAME] [-iban IBAN] [-provider ID] AMOUNT CURRENCY
                            a payment with a fresh Idempotency-Key
  payments [-limit N]       the payments made through the BFF, newest first
  events [-n N] [-for DURATION] [-last-event-id ID]
                            the payments' changes, as they happen
  logout                    end the session

global flags:
`

// app is one run of the command: its files, its BFF and its output.
type app struct {
	dir            string
	bff            *bffClient
	stdout, stderr io.Writer
	openBrowser    func(url string) error
	retryWait      func(attempt int) time.Duration // between a payment's repeats
}

// run is the whole app: main only adds the process's signals, arguments,
// environment and exit status.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	a, cmd, err := newApp(args, getenv, stdout, stderr)
	if err != nil {
		return err
	}
	return a.exec(ctx, cmd)
}

// newApp reads the global flags, and the key (made on the first run); cmd
// is the rest of the command line.
func newApp(args []string, getenv func(string) string, stdout, stderr io.Writer) (a *app, cmd []string, err error) {
	fs := flag.NewFlagSet("native", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, usage); fs.PrintDefaults() }
	base := fs.String("bff", or(getenv("BFF_URL"), "http://localhost:8080"), "the BFF's public URL (env BFF_URL)")
	dir := fs.String("dir", or(getenv("BFF_NATIVE_DIR"), defaultDir()), "where the key and the session are kept (env BFF_NATIVE_DIR)")
	if err := fs.Parse(args); err != nil {
		return nil, nil, errUsage
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return nil, nil, errUsage
	}
	key, created, err := loadOrCreateKey(filepath.Join(*dir, keyFile))
	if err != nil {
		return nil, nil, err
	}
	if created {
		fmt.Fprintf(stderr, "a new P-256 key in %s\n", filepath.Join(*dir, keyFile))
	}
	p, err := newProver(key)
	if err != nil {
		return nil, nil, err
	}
	// No redirects: nothing the app asks of the BFF answers one, and a
	// redirect would carry the token and a proof to another URL.
	noRedirect := func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	client, err := newBFFClient(*base, p,
		&http.Client{Timeout: 30 * time.Second, CheckRedirect: noRedirect}, // the BFF's own upstream timeout is 15 s
		&http.Client{CheckRedirect: noRedirect})                            // a stream lasts as long as it is read
	if err != nil {
		return nil, nil, err
	}
	a = &app{dir: *dir, bff: client, stdout: stdout, stderr: stderr, openBrowser: systemBrowser, retryWait: backoff}
	return a, fs.Args(), nil
}

// exec runs one command: cmd[0] with its flags and arguments.
func (a *app) exec(ctx context.Context, cmd []string) error {
	rest := cmd[1:]
	switch cmd[0] {
	case "login":
		return a.login(ctx, rest)
	case "call":
		return a.call(ctx, rest)
	case "pay":
		return a.pay(ctx, rest)
	case "payments":
		return a.payments(ctx, rest)
	case "events":
		return a.events(ctx, rest)
	case "logout":
		return a.logout(ctx, rest)
	}
	fmt.Fprintf(a.stderr, "native: no command %q\n", cmd[0])
	fmt.Fprint(a.stderr, usage)
	return errUsage
}

func or(v, def string) string {
	if v != "" {
		return v
	}
	return def
}

// defaultDir is the user's configuration directory's bff-native, or
// .bff-native in the working directory when there is none.
func defaultDir() string {
	if d, err := os.UserConfigDir(); err == nil {
		return filepath.Join(d, "bff-native")
	}
	return ".bff-native"
}

// subcommand parses a command's flags; want is how many arguments it takes.
func (a *app) subcommand(name, args string, want int, fs *flag.FlagSet, argv []string) ([]string, error) {
	fs.SetOutput(a.stderr)
	fs.Usage = func() {
		fmt.Fprintf(a.stderr, "usage: native %s [flags] %s\n", name, args)
		fs.PrintDefaults()
	}
	if err := fs.Parse(argv); err != nil {
		return nil, errUsage
	}
	if fs.NArg() != want {
		fs.Usage()
		return nil, errUsage
	}
	return fs.Args(), nil
}

// session is the saved session, checked against this BFF and this key.
func (a *app) session() (*savedSession, error) {
	s, err := loadSession(filepath.Join(a.dir, sessionFile))
	if err != nil {
		return nil, err
	}
	switch {
	case s.BFF != a.bff.base.String():
		return nil, fmt.Errorf("the saved session is for %s, not %s: log in again", s.BFF, a.bff.base)
	case s.bound() && s.JKT != a.bff.prover.jkt:
		// The key it was bound to is gone (a new device, a reset key
		// store): nothing can use the session again.
		return nil, errors.New("the saved session is bound to another key than this app's: log in again")
	case !s.ExpiresAt.IsZero() && time.Now().After(s.ExpiresAt):
		return nil, errors.New("the saved session has expired: log in again")
	}
	return s, nil
}

func (a *app) login(ctx context.Context, argv []string) error {
	fs := flag.NewFlagSet("login", flag.ContinueOnError)
	devUser := fs.String("dev-user", "", "log in as this user with the dev login (auth.mode dev, what make run uses)")
	redirect := fs.String("redirect-uri", "http://127.0.0.1:8765/callback", "the loopback redirect URI registered in the BFF's auth.mobile_redirect_uris")
	open := fs.Bool("open", false, "open the login page in the system browser (xdg-open, open); else only print its URL")
	timeout := fs.Duration("timeout", 5*time.Minute, "how long to wait for the browser to come back")
	if _, err := a.subcommand("login", "", 0, fs, argv); err != nil {
		return err
	}
	// A session this app still holds ends first: a login replaces it.
	if old, err := a.session(); err == nil {
		if resp, err := a.bff.send(ctx, request{method: http.MethodPost, path: "/auth/logout", session: old}); err == nil {
			drain(resp)
		}
	}
	var s *savedSession
	var err error
	if *devUser != "" {
		s, err = a.devLogin(ctx, *devUser)
	} else {
		s, err = a.loopbackLogin(ctx, *redirect, *open, *timeout)
	}
	if err != nil {
		return err
	}
	// The first request with the new session: who it is, and that the
	// binding holds.
	var who struct {
		UserID    string    `json:"userId"`
		ExpiresAt time.Time `json:"expiresAt"`
	}
	if err := a.getJSON(ctx, s, "/auth/session", &who); err != nil {
		return fmt.Errorf("the new session does not work: %w", err)
	}
	s.UserID = who.UserID
	if !who.ExpiresAt.IsZero() {
		s.ExpiresAt = who.ExpiresAt
	}
	if err := saveSession(filepath.Join(a.dir, sessionFile), s); err != nil {
		return err
	}
	if !s.bound() {
		fmt.Fprintln(a.stderr, "warning: the BFF did not bind this session to the app's key (its tokenType is not DPoP): anyone holding the token can use it")
	}
	fmt.Fprintf(a.stdout, "logged in as %s: tokenType %s, key %s, expires %s\n", s.UserID, s.TokenType, s.JKT, s.ExpiresAt.Format(time.RFC3339))
	return nil
}

// getJSON GETs path with session s and reads its JSON answer into v.
func (a *app) getJSON(ctx context.Context, s *savedSession, path string, v any) error {
	resp, err := a.bff.send(ctx, request{method: http.MethodGet, path: path, session: s})
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return readProblem(resp)
	}
	return decodeJSON(resp, v)
}

func (a *app) call(ctx context.Context, argv []string) error {
	fs := flag.NewFlagSet("call", flag.ContinueOnError)
	method := fs.String("X", http.MethodGet, "the method")
	data := fs.String("d", "", "a JSON body")
	key := fs.String("idempotency-key", "", "the Idempotency-Key (a money-moving POST needs one)")
	args, err := a.subcommand("call", "PATH", 1, fs, argv)
	if err != nil {
		return err
	}
	s, err := a.session()
	if err != nil {
		return err
	}
	r := request{method: strings.ToUpper(*method), path: args[0], session: s, header: http.Header{}}
	if *data != "" {
		r.body = []byte(*data)
	}
	if *key != "" {
		r.header.Set("Idempotency-Key", *key)
	}
	resp, err := a.bff.send(ctx, r)
	if err != nil {
		return err
	}
	if resp.StatusCode >= 400 {
		return readProblem(resp)
	}
	defer drain(resp)
	fmt.Fprintf(a.stderr, "%s\n", resp.Status)
	_, err = io.Copy(a.stdout, resp.Body)
	return err
}

func (a *app) logout(ctx context.Context, argv []string) error {
	if _, err := a.subcommand("logout", "", 0, flag.NewFlagSet("logout", flag.ContinueOnError), argv); err != nil {
		return err
	}
	s, err := a.session()
	if err != nil {
		return err
	}
	resp, err := a.bff.send(ctx, request{method: http.MethodPost, path: "/auth/logout", session: s})
	if err != nil {
		return err
	}
	msg := "logged out"
	if resp.StatusCode != http.StatusNoContent {
		err := readProblem(resp)
		var p *problemError
		// SESSION_REQUIRED: the session had already ended (timed out, or
		// revoked), so the token is of no use any more. A refused proof
		// (invalid_dpop_proof) says nothing of the session: it is kept.
		if !errors.As(err, &p) || p.Code != "SESSION_REQUIRED" || p.DPoP == "invalid_dpop_proof" || p.DPoP == "use_dpop_nonce" {
			return err
		}
		msg = "the session had already ended"
	} else {
		drain(resp)
	}
	if err := os.Remove(filepath.Join(a.dir, sessionFile)); err != nil {
		return err
	}
	fmt.Fprintln(a.stdout, msg)
	return nil
}
