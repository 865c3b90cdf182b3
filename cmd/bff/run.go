package main

import (
	"context"
	"crypto/rand"
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
	"sync"
	"syscall"
	"time"

	"github.com/exaring/otelpgx"
	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/extra/redisotel/v9"

	"github.com/fintech-bff/bff/internal/config"
	"github.com/fintech-bff/bff/internal/dpop"
	"github.com/fintech-bff/bff/internal/edge"
	"github.com/fintech-bff/bff/internal/events"
	"github.com/fintech-bff/bff/internal/kv"
	"github.com/fintech-bff/bff/internal/ledger"
	"github.com/fintech-bff/bff/internal/limits"
	"github.com/fintech-bff/bff/internal/logbuf"
	"github.com/fintech-bff/bff/internal/login"
	"github.com/fintech-bff/bff/internal/metrics"
	"github.com/fintech-bff/bff/internal/payments"
	"github.com/fintech-bff/bff/internal/proxy"
	"github.com/fintech-bff/bff/internal/receipts"
	"github.com/fintech-bff/bff/internal/session"
	"github.com/fintech-bff/bff/internal/signing"
	"github.com/fintech-bff/bff/internal/telemetry"
	"github.com/fintech-bff/bff/internal/tokens"
	"github.com/fintech-bff/bff/internal/webhooks"
)

// run is the whole program; main only wires signals and the process.
// environ is the process environment (KEY=value): BFF_* variables override
// configuration keys, and one that names no key stops start-up. It returns
// nil after a clean shutdown (ctx cancelled by SIGTERM/SIGINT).
func run(ctx context.Context, args []string, environ []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet(args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfgPath := fs.String("config", "", "path to the YAML configuration file")
	check := fs.Bool("check", false, "validate the configuration, print it with secrets redacted, and exit")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	cfg, err := config.LoadEnviron(*cfgPath, environ)
	if err != nil {
		return err
	}
	if *check {
		fmt.Fprintf(stdout, "configuration OK\n%s", cfg.Dump())
		return nil
	}
	// Tracing, when the OTEL_* environment asks for it; flushed last.
	// The OpenTelemetry SDK's own lines (a malformed OTEL_* value, a failed
	// export) are JSON on stderr as well; they are rare, so not batched.
	stopTracing, err := telemetry.Setup(ctx, slog.New(slog.NewJSONHandler(stderr, nil)))
	if err != nil {
		return fmt.Errorf("tracing (OTEL_* environment): %w", err)
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = stopTracing(sctx)
	}()
	// Log lines are batched (one write per 100 ms instead of one per
	// request); warnings and errors are written at once.
	lw := logbuf.New(stderr, 100*time.Millisecond)
	defer lw.Close()
	log := newLogger(lw, cfg.LogLevel)
	return serve(ctx, cfg, log)
}

func newLogger(w *logbuf.Writer, level string) *slog.Logger {
	var l slog.Level
	_ = l.UnmarshalText([]byte(level)) // validated by config
	var h slog.Handler = slog.NewJSONHandler(w, &slog.HandlerOptions{Level: l})
	if telemetry.On() {
		h = telemetry.LogHandler{Next: h} // trace_id and span_id on each line
	}
	return slog.New(flushOnWarn{h, w})
}

// flushOnWarn writes warnings and errors out at once, so the lines that
// explain a crash are not left in the batch.
type flushOnWarn struct {
	slog.Handler
	w *logbuf.Writer
}

func (h flushOnWarn) Handle(ctx context.Context, r slog.Record) error {
	err := h.Handler.Handle(ctx, r)
	if r.Level >= slog.LevelWarn {
		h.w.Flush()
	}
	return err
}

func (h flushOnWarn) WithAttrs(a []slog.Attr) slog.Handler {
	return flushOnWarn{h.Handler.WithAttrs(a), h.w}
}
func (h flushOnWarn) WithGroup(n string) slog.Handler {
	return flushOnWarn{h.Handler.WithGroup(n), h.w}
}

// app is everything serve builds, for shutdown.
type app struct {
	store          interface{ Ping(context.Context) error }
	limits         budgets
	counter        *limits.CounterRedis // shared request budgets; nil with the in-process store
	closer         io.Closer
	ledger         interface{ Close() }
	stopBackground func()    // stops every background loop, and waits for each, before the stores close
	static         io.Closer // the web app's directory (static_dir); nil without one
	// streams are the open event streams: ended, with a retry hint, when
	// the drain starts (a stream never goes idle by itself), and waited for
	// before the stores close.
	streams *events.Hub
}

// server is what build makes: the two handlers, readiness, the secret
// rotation, and what shutdown closes.
type server struct {
	app
	public, admin http.Handler
	ready         *edge.Readiness
	rotate        func(how string) (bool, error)
}

// build makes every part of the BFF from the configuration: stores,
// ledger, token cache, sessions, forwarder, handlers. It starts their
// background loops, which shutdown stops.
func build(ctx context.Context, cfg *config.Config, log *slog.Logger) (_ *server, err error) {
	if cfg.Auth.Mode == config.AuthModeDev {
		log.Warn("DEVELOPMENT LOGIN ENABLED: auth.mode is dev, anyone can log in as any user id; never run this in production")
	}
	// The client secret's one owner: the minter sends it, the token cache
	// subscribes to it, SIGHUP and POST /reload-secret rotate it.
	secret, err := tokens.NewSecret(func() (string, error) {
		s, err := cfg.Upstream.LoadClientSecret()
		return s.Reveal(), err
	}, log)
	if err != nil {
		return nil, err
	}
	store, a, err := openStore(cfg, log)
	if err != nil {
		return nil, err
	}
	k, err := loadKeys(cfg, log)
	if err != nil {
		return nil, err
	}
	reg := prometheus.NewRegistry()
	p := &parts{cfg: cfg, log: log, store: store, keys: k, secret: secret, obs: metrics.New(reg), bg: newLoops(log)}
	defer func() {
		if err != nil {
			p.bg.stop()
		}
	}()
	a.stopBackground = p.bg.stop
	if err := p.identity(); err != nil {
		return nil, err
	}
	if err := p.money(ctx, &a); err != nil {
		return nil, err
	}
	public, err := p.edge(ctx, &a)
	if err != nil {
		return nil, err
	}
	// rotate is what SIGHUP and POST /reload-secret do (how names which).
	rotate := func(how string) (bool, error) {
		changed, err := secret.Rotate(context.Background())
		if !changed {
			log.Info(how+": client secret unchanged", slog.Bool("readError", err != nil))
			return false, err
		}
		log.Info(how + ": client secret rotated; tokens minted under the old one are no longer used")
		return true, nil
	}
	adminToken, err := cfg.LoadAdminToken()
	if err != nil {
		return nil, err
	}
	if adminToken == "" {
		log.Info("admin_token_file is not set: the admin listener's POST /reload-secret and DELETE /users/{userId}/sessions are off (404)")
	}
	ready := edge.NewReadiness()
	admin := edge.NewAdmin(edge.AdminDeps{Ready: ready, Gatherer: reg, Sessions: p.sessions, Tokens: p.cache, Observe: p.obs.Edge, Logger: log, Pprof: cfg.Pprof,
		ReloadSecret: func() (bool, error) { return rotate("POST /reload-secret") },
		Token:        adminToken.Reveal(),
	})
	return &server{app: a, public: public, admin: admin, ready: ready, rotate: rotate}, nil
}

// keys are the BFF's own keys, from the configuration (a random one, with
// a warning, where a development setup gives none).
type keys struct {
	enc           []byte
	dec, sessions [][]byte
}

func loadKeys(cfg *config.Config, log *slog.Logger) (keys, error) {
	var k keys
	var err error
	if k.enc, err = keyOrRandom(cfg.Redis.DecodedEncryptionKey, "redis.encryption_key", log); err != nil {
		return k, err
	}
	if k.dec, err = cfg.Redis.DecodedDecryptionKeys(); err != nil {
		return k, err
	}
	if k.sessions, err = cfg.Session.DecodedKeys(); err != nil {
		return k, err
	}
	if len(k.sessions) == 0 {
		log.Warn("session.keys is empty: using a random key; sessions end on restart and are not shared between instances")
		k.sessions = [][]byte{randomKey()}
	}
	return k, nil
}

// parts are what build makes, in the order it makes them: identity (the
// upstream's tokens, sessions, cookies), money (the ledger, the
// forwarder, payments and their event streams), the edge.
type parts struct {
	cfg    *config.Config
	log    *slog.Logger
	store  sharedStore
	keys   keys
	secret *tokens.Secret
	obs    *metrics.Metrics
	bg     *loops

	transport http.RoundTripper
	cache     *tokens.Cache
	sessions  *session.Manager
	cookies   *session.Cookies
	fwd       *proxy.Forwarder
	pay       *payments.Service
	pusher    *events.Pusher
}

// identity makes the upstream token cache (and its minter), the sessions
// and their cookies, and starts their loops.
func (p *parts) identity() error {
	cfg, log := p.cfg, p.log
	p.transport = proxy.NewTransport(cfg.Upstream.Timeout)
	if telemetry.On() {
		// A client span per attempt, and the BFF's traceparent upstream.
		p.transport = telemetry.Transport(p.transport)
	}
	minter := tokens.NewMinter(tokens.MinterOptions{
		BaseURL: cfg.Upstream.BaseURL, ClientID: cfg.Upstream.ClientID,
		Secret:        p.secret,
		ExpiresInUnit: cfg.Upstream.ExpiresInDuration(),
		Client:        &http.Client{Transport: p.transport, Timeout: cfg.Upstream.Timeout},
	})
	var err error
	p.cache, err = tokens.NewCache(p.store, minter, p.secret, tokens.CacheOptions{
		EncryptionKey: p.keys.enc, RefreshBefore: cfg.Upstream.RefreshBefore, MaxTTL: cfg.Upstream.MaxTokenTTL,
		LocalBytes: cfg.Upstream.TokenCacheBytes, MintTimeout: cfg.Upstream.Timeout,
		Observe: p.obs.Tokens, Logger: log,
	})
	if err != nil {
		return err
	}
	p.bg.run(p.cache.Run)
	p.sessions = session.NewManager(p.store, session.Options{
		IdleTimeout: cfg.Session.IdleTimeout, AbsoluteTimeout: cfg.Session.AbsoluteTimeout,
		LocalBytes: cfg.Session.CacheBytes, MaxPerUser: cfg.Limits.SessionsPerUser, Observe: p.obs.Sessions, Logger: log,
	})
	p.bg.run(p.sessions.Run)
	p.cookies, err = session.NewCookies(session.CookieOptions{
		Name: cfg.Session.CookieName, Secure: cfg.Session.SecureCookie, Keys: p.keys.sessions,
		MaxAge: cfg.Session.AbsoluteTimeout,
	})
	return err
}

// money opens the ledger and makes the forwarder, payments and the event
// streams, and starts their loops.
func (p *parts) money(ctx context.Context, a *app) error {
	cfg, log := p.cfg, p.log
	routes := make([]proxy.Route, len(cfg.Upstream.Routes))
	for i, r := range cfg.Upstream.Routes {
		routes[i] = proxy.Route{Prefix: r.Prefix, Methods: r.Methods}
	}
	led, err := openLedger(ctx, cfg, p.keys.enc, p.keys.dec, log)
	if err != nil {
		return err
	}
	a.ledger = led
	p.fwd = proxy.New(proxy.Options{
		BaseURL: cfg.Upstream.BaseURLParsed(), Routes: proxy.NewRoutes(routes), Tokens: p.cache, Transport: p.transport,
		Timeout: cfg.Upstream.Timeout, MaxBodyBytes: cfg.Upstream.MaxBodyBytes,
		Retry: proxy.Retry{
			MaxAttempts: cfg.Upstream.Retry.MaxAttempts, BaseDelay: cfg.Upstream.Retry.BaseDelay,
			MaxDelay: cfg.Upstream.Retry.MaxDelay,
		},
		Logger: log, Observe: p.obs.Upstream,
	})
	receiptKeys, err := openReceiptKeys(cfg, p.keys.enc, p.keys.dec)
	if err != nil {
		return err
	}
	var background payments.Ledger = led
	if pg, ok := led.(*ledger.Postgres); ok {
		background = pg.Background() // the loops' own connections
	}
	p.pay = payments.New(payments.Options{
		Upstream: p.fwd, Timeout: cfg.Upstream.Timeout, MoneyRoutes: cfg.Upstream.MoneyRoutes, Ledger: led, Background: background,
		Refresh: a.limits, RefreshEvery: cfg.Limits.RefreshInterval,
		Logger: log, Observe: p.obs.Payments,
		Instance: instance, EncryptionKey: p.keys.enc, DecryptionKeys: p.keys.dec,
		Follow: payments.Follow{Interval: cfg.Payments.WatchInterval, MaxInterval: cfg.Payments.WatchMaxInterval,
			For: cfg.Payments.WatchFor, Batch: cfg.Payments.WatchBatch},
		StepUp: stepUpPolicy(cfg), ListLag: cfg.Payments.ListLag,
		ReceiptKeys: receiptKeys, Issuer: strings.TrimSuffix(cfg.PublicURL, "/"),
	})
	hub := events.NewHub(events.Limits{PerUser: cfg.Limits.StreamsPerUser, PerAddress: cfg.Limits.StreamsPerAddress,
		PerInstance: events.InstanceBound(cfg.Limits.StreamsPerInstance)})
	if n, fds := cfg.Limits.StreamsPerInstance, events.DescriptorLimit(); fds > 0 && uint64(n) > fds/2 {
		log.Warn("limits.streams_per_instance leaves less than half of the open descriptors for anything else: requests, Redis, PostgreSQL and the upstream may find none",
			slog.Int("streamsPerInstance", n), slog.Uint64("descriptorLimit", fds))
	}
	p.obs.Probe(metrics.Probes{Store: a.store.Ping, Ledger: led.Ping, Unknowns: led.Unknowns, Streams: hub.Count,
		StreamsLimit: func() int { return hub.Limits().PerInstance }})
	// The settler: every instance runs it, the ledger hands each open
	// record to one of them at a time.
	p.bg.run(p.pay.Run)
	// The follower: every instance runs it, the ledger leases each
	// followed payment to one of them at a time.
	p.bg.run(p.pay.RunFollow)
	// The event streams: the ledger's announcements wake the streams of
	// the user whose payments changed; a session's end (here or announced
	// by another instance) ends its streams before it is acknowledged.
	p.bg.runErr("ledger listen", func(ctx context.Context) error { return led.Listen(ctx, hub.Changed, hub.Resync, log) })
	p.sessions.OnEnd(hub.SessionEnded)
	// The pusher writes the streams the edge opens; stopped after the
	// drain (Hub.Wait), it closes any stream still open.
	p.pusher = events.NewPusher(hub, p.pay, p.sessions, 0)
	p.bg.run(p.pusher.Run)
	a.streams = hub
	return nil
}

// edge makes the public handler: its dependencies, the webhooks, the web
// app, the login and, with step-up, the check that the provider can bind
// an approval.
func (p *parts) edge(ctx context.Context, a *app) (http.Handler, error) {
	cfg, log := p.cfg, p.log
	// DPoP proofs of device-bound sessions: the jti of each accepted one
	// is claimed in the shared store, so a proof is accepted once across
	// every instance; on Redis, concurrent proofs' claims share a round
	// trip (kv.Claims).
	var replay dpop.ReplayStore = p.store
	if r, ok := p.store.(*kv.Redis); ok {
		replay = kv.NewClaims(r, kv.DefaultClaimBatch)
	}
	proofs, err := dpop.NewVerifier(dpop.Options{Replay: replay})
	if err != nil {
		return nil, err
	}
	deps := edge.Deps{
		Observability: edge.Observability{Logger: log, Observe: p.obs.Edge},
		Clients: edge.Clients{
			PublicOrigin: cfg.PublicOrigin(), AllowedOrigins: cfg.CORS.AllowedOrigins,
			TrustedProxies: cfg.TrustedProxyPrefixes(), TraceparentFrom: cfg.TraceparentPrefixes(), TrustClientTraceparent: cfg.TrustClientTraceparent,
		},
		Sessions: edge.Sessions{Manager: p.sessions, Cookies: p.cookies, Tokens: p.cache},
		DPoP:     edge.DPoP{Mode: cfg.Session.MobileDPoP, Verifier: proofs, Observe: p.obs.DPoP},
		Login:    edge.Login{Dev: cfg.Auth.Mode == config.AuthModeDev, MobileRedirectURIs: cfg.Auth.MobileRedirectURIs},
		Limits: edge.Limits{
			PerAddress: a.limits, AuthPerMinute: cfg.Limits.AuthPerMinute, BackchannelPerMinute: cfg.Limits.BackchannelPerMinute,
			PendingLoginsPerAddress: cfg.Limits.PendingLoginsPerAddress, IPv6Prefix: cfg.Limits.IPv6Prefix,
			Budget: sessionBudget(p.bg, cfg, *a, log),
		},
		API:      edge.API{Forwarder: p.fwd, Payments: p.pay, Development: cfg.Env != config.EnvProduction},
		Payments: edge.PaymentRoutes{Records: p.pay, Streams: p.pusher},
	}
	if cfg.Payments.WebhookPath != "" {
		secrets := make([]string, len(cfg.Payments.WebhookSecrets))
		for i, s := range cfg.Payments.WebhookSecrets {
			secrets[i] = s.Reveal()
		}
		v, err := webhooks.NewVerifier(secrets, webhooks.DefaultTolerance)
		if err != nil {
			return nil, fmt.Errorf("payments.webhook_secrets: %w", err)
		}
		deps.Webhooks = &edge.Webhooks{Path: cfg.Payments.WebhookPath, Verifier: v, Payments: p.pay}
	}
	if cfg.StaticDir != "" {
		if deps.Static, err = edge.OpenStatic(cfg.StaticDir, strings.HasPrefix(cfg.PublicURL, "https://")); err != nil {
			return nil, err
		}
		a.static = deps.Static
	}
	if cfg.Auth.Mode == config.AuthModeOIDC {
		if deps.Login.OIDC, deps.Login.Cookies, err = openLogin(ctx, cfg, p.store, p.keys.sessions, p.keys.enc, p.keys.dec, p.obs.Login); err != nil {
			return nil, err
		}
	}
	if cfg.Payments.StepUp.Enabled {
		if err := stepUpProvider(deps.Login.OIDC); err != nil {
			return nil, err
		}
		deps.Payments.StepUps = p.pay
	}
	return edge.NewPublic(deps), nil
}

// stepUpProvider checks that the provider can show and bind an approval:
// without payment_initiation details it could not show the user what they
// approve, and the approval could not be bound to the payment (refused
// rather than held for nothing); a change of a merchant (where money goes)
// is held too, and its approval bound the same way.
func stepUpProvider(oidc *login.Provider) error {
	if !oidc.SupportsDetails(payments.DetailType) {
		return fmt.Errorf("payments.step_up: the OpenID provider's discovery document does not list %q in authorization_details_types_supported (RFC 9396): approvals could not be bound to the payment", payments.DetailType)
	}
	if !oidc.SupportsDetails(payments.PayeeChangeType) {
		return fmt.Errorf("payments.step_up: the OpenID provider's discovery document does not list %q in authorization_details_types_supported (RFC 9396): a change of a merchant's account could not be approved", payments.PayeeChangeType)
	}
	return nil
}

// serve builds the BFF, listens on both listeners, and runs until ctx ends
// (SIGTERM) or a listener fails; SIGHUP re-reads the client secret.
func serve(ctx context.Context, cfg *config.Config, log *slog.Logger) error {
	sv, err := build(ctx, cfg, log)
	if err != nil {
		return err
	}
	public, admin, ready, rotate, a := sv.public, sv.admin, sv.ready, sv.rotate, sv.app
	publicLn, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		a.release()
		return fmt.Errorf("listen: %w", err)
	}
	adminLn, err := net.Listen("tcp", cfg.AdminListen)
	if err != nil {
		publicLn.Close()
		a.release()
		return fmt.Errorf("admin_listen: %w", err)
	}
	errLog := slog.NewLogLogger(log.Handler(), slog.LevelWarn)
	publicSrv := &http.Server{
		Handler: public, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
		WriteTimeout: cfg.Upstream.Timeout + 15*time.Second, IdleTimeout: 120 * time.Second,
		MaxHeaderBytes: 64 << 10, ErrorLog: errLog,
	}
	if sv.streams != nil {
		publicSrv.RegisterOnShutdown(sv.streams.Shutdown)
	}
	adminSrv := &http.Server{
		Handler: admin, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second,
		WriteTimeout: 30 * time.Second, ErrorLog: errLog,
	}
	serveErr := make(chan error, 2)
	var wg sync.WaitGroup
	for _, sv := range []struct {
		srv *http.Server
		ln  net.Listener
	}{{publicSrv, publicLn}, {adminSrv, adminLn}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := sv.srv.Serve(sv.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				serveErr <- err
			}
		}()
	}
	log.Info("bff started", slog.String("instance", instance), slog.String("listen", publicLn.Addr().String()),
		slog.String("admin_listen", adminLn.Addr().String()), slog.String("env", cfg.Env),
		slog.String("auth_mode", cfg.Auth.Mode), slog.Bool("in_process_store", cfg.Redis.InProcessStore()))

	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)

	for {
		select {
		case <-hup:
			_, _ = rotate("SIGHUP")
		case err := <-serveErr:
			return shutdown(publicSrv, adminSrv, a, &wg, 0, time.Second, log, err)
		case <-ctx.Done():
			ready.Drain()
			log.Info("shutting down: draining", slog.Duration("shutdown_delay", cfg.ShutdownDelay))
			return shutdown(publicSrv, adminSrv, a, &wg, cfg.ShutdownDelay, cfg.ShutdownTimeout, log, nil)
		}
	}
}

// release stops the background loops and waits for them, then closes
// Redis, the ledger and the web app's directory.
func (a app) release() {
	if a.stopBackground != nil {
		a.stopBackground()
	}
	if a.static != nil {
		_ = a.static.Close()
	}
	if a.closer != nil {
		_ = a.closer.Close()
	}
	if a.ledger != nil {
		a.ledger.Close()
	}
}

// shutdown waits delay (so the load balancer sees /readyz fail), lets
// in-flight requests finish within timeout, and closes the store last.
func shutdown(public, admin *http.Server, a app, wg *sync.WaitGroup, delay, timeout time.Duration, log *slog.Logger, cause error) error {
	time.Sleep(delay)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	err := public.Shutdown(ctx)
	if err != nil {
		log.Warn("drain timed out; closing remaining connections", slog.String("error", err.Error()))
		_ = public.Close()
	}
	if a.streams != nil {
		// The event streams were taken from the server (Shutdown does not
		// see them); Shutdown's start ended them: wait for their hints.
		a.streams.Wait(ctx)
	}
	_ = admin.Shutdown(ctx)
	wg.Wait()
	a.release()
	log.Info("stopped")
	return cause
}

// sharedStore is everything the BFF keeps in Redis (or in process).
type sharedStore interface {
	tokens.Store
	session.Store
	login.Store
	dpop.ReplayStore
	Ping(context.Context) error
}

var (
	_ sharedStore = (*kv.Redis)(nil)
	_ sharedStore = (*kv.Memory)(nil)
)

func openStore(cfg *config.Config, log *slog.Logger) (sharedStore, app, error) {
	if cfg.Redis.InProcessStore() {
		log.Warn("redis.url is empty: using the in-process store; run one instance only, sessions end on restart")
		m := kv.NewMemory(nil)
		return m, app{store: m, limits: limits.NewLocal(nil)}, nil
	}
	kv.SetLogger(log)
	client, err := kv.NewClient(kv.ClientOptions{
		URL: cfg.Redis.URL.Reveal(), SentinelMaster: cfg.Redis.Sentinel.Master, SentinelAddrs: cfg.Redis.Sentinel.Addrs,
		SentinelPassword: cfg.Redis.Sentinel.Password.Reveal(), ClusterAddrs: cfg.Redis.ClusterAddrs,
		Username: cfg.Redis.Username, Password: cfg.Redis.Password.Reveal(), TLS: cfg.Redis.TLS,
		DialTimeout: cfg.Redis.DialTimeout, ReadTimeout: cfg.Redis.ReadTimeout, WriteTimeout: cfg.Redis.WriteTimeout,
		PoolSize: cfg.Redis.PoolSize,
	})
	if err != nil {
		return nil, app{}, err
	}
	if telemetry.On() {
		// A span per command, named by the command: never its arguments
		// (keys name sessions, values hold tokens).
		if err := redisotel.InstrumentTracing(client, redisotel.WithDBStatement(false), redisotel.WithCallerEnabled(false)); err != nil {
			return nil, app{}, err
		}
	}
	r := kv.NewRedis(client, cfg.Redis.KeyPrefix)
	// Idle counters are forgotten after a minute: a bucket refills long before.
	return r, app{store: r, closer: client, limits: limits.NewRedis(client, cfg.Redis.KeyPrefix+"lim:"),
		counter: limits.NewCounterRedis(client, cfg.Redis.KeyPrefix+"lim:", time.Minute)}, nil
}

// budgets are the shared limits (limits.Redis, or limits.Local with the
// in-process store).
type budgets interface {
	edge.RateLimiter
	payments.Guard
}

var (
	_ budgets = (*limits.Redis)(nil)
	_ budgets = (*limits.Local)(nil)
)

// budgetSync is how often a session that outgrew its share of the request
// budget on this instance is exchanged with the others: the overshoot of
// the shared budget grows with it (see limits.Budget), and so does nothing
// else on the request path.
const budgetSync = 100 * time.Millisecond

// sessionBudget starts the per-session request budget, or returns nil when
// limits.requests_per_second is 0.
func sessionBudget(bg *loops, cfg *config.Config, a app, log *slog.Logger) edge.SessionBudget {
	if cfg.Limits.RequestsPerSecond <= 0 {
		return nil
	}
	var counter limits.Counter
	var registry limits.Registry
	if a.counter != nil {
		counter, registry = a.counter, a.counter
	}
	b := limits.NewBudget(float64(cfg.Limits.RequestsPerSecond), cfg.Limits.Burst, counter, nil)
	bg.run(func(ctx context.Context) { b.Run(ctx, budgetSync, registry, metrics.NewBudgets(log)) })
	return b
}

// instance names this process in what it sends the upstream on its own
// (the polls of followed payments) and in its start-up line.
var instance = session.NewID()[:8]

// ledgerStore is the payments ledger as run uses it.
type ledgerStore interface {
	payments.Ledger
	Unknowns(ctx context.Context) (int64, time.Time, error) // bff_payments_unknown
	Listen(ctx context.Context, changed func(userID string), resync func(), log *slog.Logger) error
	Ping(context.Context) error
	Close()
}

var (
	_ ledgerStore = (*ledger.Postgres)(nil)
	_ ledgerStore = (*ledger.Memory)(nil)
)

// openLedger opens the PostgreSQL ledger, or in development without
// ledger.postgres_url an in-process one (config refuses that in
// production).
func openLedger(ctx context.Context, cfg *config.Config, encKey []byte, decKeys [][]byte, log *slog.Logger) (ledgerStore, error) {
	if cfg.Ledger.PostgresURL == "" {
		log.Warn("NO PAYMENTS LEDGER: ledger.postgres_url is empty, so payments are deduplicated in this process only and forgotten on restart; " +
			"never run more than one instance like this, and never in production")
		return ledger.NewMemory(nil, encKey, decKeys)
	}
	// Start-up waits this long for the database (it may be starting too).
	octx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	l, err := ledger.Open(octx, ledger.Options{
		URL: cfg.Ledger.PostgresURL.Reveal(), EncryptionKey: encKey, DecryptionKeys: decKeys, MaxConns: int32(cfg.Ledger.MaxConns),
		Tracer: ledgerTracer(), Log: log,
	})
	if err != nil {
		return nil, fmt.Errorf("ledger.postgres_url: %w", err)
	}
	if cfg.Env == config.EnvProduction { // what the database promises: docs/ledger-database.md
		if err := l.CheckDurability(octx, cfg.Ledger.RequireSynchronousReplication, log); err != nil {
			l.Close()
			return nil, fmt.Errorf("ledger.postgres_url: %w", err)
		}
	}
	return l, nil
}

// ledgerTracer traces the ledger's queries while tracing is on: the SQL
// with its placeholders, never the arguments (otelpgx's default).
func ledgerTracer() pgx.QueryTracer {
	if !telemetry.On() {
		return nil
	}
	return otelpgx.NewTracer()
}

// stepUpPolicy is payments.step_up as payments takes it; nil when off.
func stepUpPolicy(cfg *config.Config) *payments.StepUp {
	su := cfg.Payments.StepUp
	if !su.Enabled {
		return nil
	}
	thresholds := map[string]string{}
	for _, t := range su.Thresholds {
		if cur, amount, ok := config.Threshold(t); ok {
			thresholds[cur] = amount
		}
	}
	return &payments.StepUp{Routes: su.Routes, Always: su.Always, Thresholds: thresholds, ACRValues: su.ACRValues,
		MaxAge: su.MaxAge, HoldFor: su.HoldFor, URL: strings.TrimSuffix(cfg.PublicURL, "/") + "/auth/step-up"}
}

// openReceiptKeys reads payments.receipts.keys_file or, without one,
// derives an Ed25519 key from the encryption key (and one from each
// decryption key, published so that receipts signed before a rotation
// still verify): the same on every instance.
func openReceiptKeys(cfg *config.Config, encKey []byte, decKeys [][]byte) (*signing.Keys, error) {
	r := cfg.Payments.Receipts
	if r.KeysFile == "" {
		return signing.Derived("bff payment receipts", append([][]byte{encKey}, decKeys...)...)
	}
	b, err := os.ReadFile(r.KeysFile)
	if err != nil {
		return nil, fmt.Errorf("payments.receipts.keys_file: %w", err) // names the path, never the content
	}
	k, err := signing.Parse(b, r.KeyID, receipts.Algorithms...)
	if err != nil {
		return nil, fmt.Errorf("payments.receipts.keys_file %s: %w", r.KeysFile, err)
	}
	return k, nil
}

// openLogin discovers the OpenID provider and makes the login binding
// cookie's codec (same keys as the session cookie, its own name).
func openLogin(ctx context.Context, cfg *config.Config, store login.Store, keys [][]byte, encKey []byte, decKeys [][]byte, observe login.Observer) (*login.Provider, *session.Cookies, error) {
	o := cfg.Auth.OIDC
	var clientKeys *login.ClientKeys
	if o.ClientKeysFile != "" {
		b, err := os.ReadFile(o.ClientKeysFile)
		if err != nil {
			return nil, nil, fmt.Errorf("auth.oidc.client_keys_file: %w", err) // names the path, never the content
		}
		if clientKeys, err = login.ParseClientKeys(b, o.ClientKeyID); err != nil {
			return nil, nil, fmt.Errorf("auth.oidc.client_keys_file %s: %w", o.ClientKeysFile, err)
		}
	}
	dctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	prov, err := login.New(dctx, login.Options{
		Issuer: o.Issuer, ClientID: o.ClientID, ClientSecret: o.ClientSecret.Reveal(), RedirectURL: o.RedirectURL,
		Scopes: o.Scopes, UserIDClaim: o.UserIDClaim, PostLogoutRedirectURL: strings.TrimSuffix(cfg.PublicURL, "/") + "/",
		MobileRedirectURIs: cfg.Auth.MobileRedirectURIs, Store: store, EncryptionKey: encKey,
		DecryptionKeys: decKeys, HTTPClient: &http.Client{Timeout: 10 * time.Second}, Observe: observe,
		Profile: o.Profile, ClientKeys: clientKeys,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("auth.oidc.issuer: %w", err)
	}
	name := config.LoginCookiePrefix
	if cfg.Session.SecureCookie {
		name = "__Host-" + config.LoginCookiePrefix
	}
	binding, err := session.NewCookies(session.CookieOptions{Name: name, Secure: cfg.Session.SecureCookie, Keys: keys, MaxAge: login.StateTTL})
	if err != nil {
		return nil, nil, err
	}
	return prov, binding, nil
}

// keyOrRandom returns the configured key or, when none is set (allowed in
// development only; config refuses it in production), a random one.
func keyOrRandom(decode func() ([]byte, error), name string, log *slog.Logger) ([]byte, error) {
	k, err := decode()
	if err != nil {
		return nil, err
	}
	if k != nil {
		return k, nil
	}
	log.Warn(name + " is empty: using a random key; cached tokens are not shared between instances or restarts")
	return randomKey(), nil
}

func randomKey() []byte {
	k := make([]byte, 32)
	_, _ = rand.Read(k)
	return k
}
