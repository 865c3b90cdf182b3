// Command upstream-sim serves the simulated upstream finance and payments
// API (internal/upstreamsim) for frontend development and the BFF's tests.
// See docs/upstream-sim.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/fintech-bff/bff/internal/upstreamsim"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "upstream-sim:", err)
		os.Exit(1)
	}
}

// shutdownTimeout bounds the graceful shutdown.
const shutdownTimeout = 10 * time.Second

// run parses args, serves the simulator until ctx is done, then shuts down
// gracefully. Logs are JSON on stderr; the client secret and tokens are
// never logged.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("upstream-sim", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "127.0.0.1:8081", "address to listen on")
	control := fs.Bool("control", false, "enable the /_sim/ control API")
	clientID := fs.String("client-id", "dev-client", "accepted clientId")
	clientSecret := fs.String("client-secret", "dev-secret", "accepted clientSecret (env SIM_CLIENT_SECRET overrides)")
	plan := fs.String("plan", upstreamsim.PlanPro, "organization plan: free, starter or pro")
	production := fs.Bool("production-access", false, "lift the sandbox gate")
	ttl := fs.Duration("token-ttl", time.Hour, "access token lifetime")
	unit := fs.String("expires-in-unit", upstreamsim.UnitSeconds, "unit of expiresIn: seconds or milliseconds")
	credits := fs.Int("credits", 100, "starting credit balance")
	accountCap := fs.Int("account-cap", 5, "corporate-account (connection) cap")
	lock := fs.Bool("bigquery-lock", true, "refuse (423) deleting connections younger than 90 minutes")
	redirects := fs.String("allowed-redirect-urls", strings.Join(upstreamsim.DefaultRedirectURLs, ","),
		"comma-separated redirect url allow-list")
	publicURL := fs.String("public-url", "",
		"where a browser reaches this simulator, for payUrl and connectUrl (default: the scheme and Host each API request came to)")
	shape := fs.String("unauthorized-shape", upstreamsim.Shape401Message, "token endpoint 401 body: message or typed")
	seed := fs.String("seed", "", "seed of the seed data and of created ids (with -now, every reply repeats run after run)")
	now := fs.String("now", "", "RFC 3339 time to freeze the clock at; only the control API's clock/advance moves it")
	webhookURL := fs.String("webhook-url", "", "post a signed webhook to this URL on every payment status change (default: none)")
	webhookSecret := fs.String("webhook-secret", "",
		"whsec_ secret that signs webhooks (env SIM_WEBHOOK_SECRET overrides; default: upstreamsim.DefaultWebhookSecret, public)")
	profile := fs.String("reply-profile", upstreamsim.ProfileFull,
		"what payments carry in replies: full (every field, updatedAt included) or documented (only what the API documents)")
	listLag := fs.Duration("list-lag", 0, "how long a new payment stays out of GET /v2/payments (the list; GET /v2/payments/{id} finds it at once)")
	verbose := fs.Bool("v", false, "log every request (debug level)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	var start time.Time
	if *now != "" {
		t, err := time.Parse(time.RFC3339, *now)
		if err != nil {
			return fmt.Errorf("-now %q: want an RFC 3339 time such as 2026-07-23T04:12:09Z", *now)
		}
		start = t
	}
	if v := getenv("SIM_CLIENT_SECRET"); v != "" {
		*clientSecret = v
	}
	if v := getenv("SIM_WEBHOOK_SECRET"); v != "" {
		*webhookSecret = v
	}
	level := slog.LevelInfo
	if *verbose {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: level}))

	// Options treats 0 as "default"; negative means 0.
	if *credits == 0 {
		*credits = -1 // an empty balance
	}
	if *accountCap == 0 {
		*accountCap = -1 // no new connection
	}
	opts := upstreamsim.Options{
		ClientID: *clientID, ClientSecret: *clientSecret, Plan: *plan, ProductionAccess: *production,
		TokenTTL: *ttl, ExpiresInUnit: *unit, Credits: *credits, AccountCap: *accountCap,
		BigQueryLock: upstreamsim.Bool(*lock), AllowedRedirectURLs: splitList(*redirects),
		Control: *control, Logger: log, Unauthorized401Shape: *shape, PublicURL: *publicURL, Seed: *seed, Start: start,
		WebhookURL: *webhookURL, WebhookSecret: *webhookSecret, ReplyProfile: *profile, ListLag: *listLag,
	}
	if err := opts.Validate(); err != nil {
		return err
	}
	sim := upstreamsim.New(opts)
	defer sim.Close() // after Shutdown: no webhook goes out once run returns

	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = io.WriteString(w, "ok\n")
	})
	mux.Handle("/", sim)
	// No WriteTimeout: Delay faults must be able to outlast any client timeout.
	srv := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	log.Info("upstream-sim listening",
		slog.String("addr", ln.Addr().String()), slog.String("clientId", *clientID),
		slog.String("plan", *plan), slog.Bool("productionAccess", *production),
		slog.Duration("tokenTTL", *ttl), slog.String("expiresInUnit", *unit),
		slog.Int("credits", max(*credits, 0)), slog.Bool("control", *control), slog.String("publicURL", *publicURL),
		slog.String("seed", *seed), slog.String("now", *now), slog.String("webhookUrl", *webhookURL),
		slog.String("replyProfile", *profile), slog.Duration("listLag", *listLag))
	fmt.Fprintf(stdout, "upstream-sim listening on http://%s\n", ln.Addr())

	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	log.Info("upstream-sim shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// splitList splits a comma-separated flag value; "" is an empty list, not
// nil (which Options reads as "the default").
func splitList(s string) []string {
	out := []string{}
	for p := range strings.SplitSeq(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
