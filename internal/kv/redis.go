package kv

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"
)

// Redis is a store on a go-redis universal client. It is safe for concurrent
// use. It does not own the client: the caller closes it.
type Redis struct {
	client redis.UniversalClient
	prefix string
}

// NewRedis returns a store that prefixes every key with prefix.
func NewRedis(client redis.UniversalClient, prefix string) *Redis {
	return &Redis{client: client, prefix: prefix}
}

func unavailable(op string, err error) error {
	return fmt.Errorf("%w: %s: %v", ErrUnavailable, op, err)
}

// Get returns the value at key, or ErrNotFound.
func (r *Redis) Get(ctx context.Context, key string) ([]byte, error) {
	b, err := r.client.Get(ctx, r.prefix+key).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, unavailable("get", err)
	}
	return b, nil
}

// Set stores value at key for ttl (which must be positive).
func (r *Redis) Set(ctx context.Context, key string, value []byte, ttl time.Duration) error {
	if err := r.client.Set(ctx, r.prefix+key, value, ttl).Err(); err != nil {
		return unavailable("set", err)
	}
	return nil
}

// SetIfExists replaces the value at key and sets its ttl (which must be
// positive) only when key exists, atomically (SET XX), and reports whether
// it did. It updates a record without ever recreating one that was deleted
// meanwhile: a write computed before a delete cannot bring the key back,
// however late it arrives (a retried send included).
func (r *Redis) SetIfExists(ctx context.Context, key string, value []byte, ttl time.Duration) (bool, error) {
	ok, err := r.client.SetXX(ctx, r.prefix+key, value, ttl).Result()
	if err != nil {
		return false, unavailable("setxx", err)
	}
	return ok, nil
}

// Del removes key; a missing key is not an error.
func (r *Redis) Del(ctx context.Context, key string) error {
	if err := r.client.Del(ctx, r.prefix+key).Err(); err != nil {
		return unavailable("del", err)
	}
	return nil
}

// Ping reports whether Redis answers.
func (r *Redis) Ping(ctx context.Context) error {
	if err := r.client.Ping(ctx).Err(); err != nil {
		return unavailable("ping", err)
	}
	return nil
}

// ClientOptions selects and tunes a Redis topology. Exactly one of URL,
// SentinelMaster (with SentinelAddrs) or ClusterAddrs is set.
type ClientOptions struct {
	URL              string // redis:// or rediss://
	SentinelMaster   string
	SentinelAddrs    []string
	SentinelPassword string
	ClusterAddrs     []string
	// Username, Password and TLS apply to the nodes behind Sentinel or
	// Cluster; a URL carries its own.
	Username     string
	Password     string
	TLS          bool
	DialTimeout  time.Duration
	ReadTimeout  time.Duration
	WriteTimeout time.Duration
	PoolSize     int
}

// NewClient builds a go-redis universal client for the chosen topology. It
// does not connect; the first command does.
func NewClient(o ClientOptions) (redis.UniversalClient, error) {
	var tlsConfig *tls.Config
	if o.TLS {
		tlsConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	switch {
	case len(o.ClusterAddrs) > 0:
		return redis.NewClusterClient(&redis.ClusterOptions{
			Addrs: o.ClusterAddrs, Username: o.Username, Password: o.Password, TLSConfig: tlsConfig,
			DialTimeout: o.DialTimeout, ReadTimeout: o.ReadTimeout, WriteTimeout: o.WriteTimeout, PoolSize: o.PoolSize,
		}), nil
	case o.SentinelMaster != "":
		return redis.NewFailoverClient(&redis.FailoverOptions{
			MasterName: o.SentinelMaster, SentinelAddrs: o.SentinelAddrs, SentinelPassword: o.SentinelPassword,
			Username: o.Username, Password: o.Password, TLSConfig: tlsConfig,
			DialTimeout: o.DialTimeout, ReadTimeout: o.ReadTimeout, WriteTimeout: o.WriteTimeout, PoolSize: o.PoolSize,
		}), nil
	default:
		opt, err := redis.ParseURL(o.URL)
		if err != nil {
			// The URL may carry a password: never echo it.
			return nil, errors.New("kv: redis.url is not a valid redis:// or rediss:// URL")
		}
		if o.DialTimeout > 0 {
			opt.DialTimeout = o.DialTimeout
		}
		if o.ReadTimeout > 0 {
			opt.ReadTimeout = o.ReadTimeout
		}
		if o.WriteTimeout > 0 {
			opt.WriteTimeout = o.WriteTimeout
		}
		if o.PoolSize > 0 {
			opt.PoolSize = o.PoolSize
		}
		return redis.NewClient(opt), nil
	}
}

// delIfPrefix deletes KEYS[1] when its value starts with ARGV[1].
var delIfPrefix = redis.NewScript(`
local v = redis.call("GET", KEYS[1])
if v and string.sub(v, 1, string.len(ARGV[1])) == ARGV[1] then
  return redis.call("DEL", KEYS[1])
end
return 0`)

// SetNX stores value at key for ttl only when key is absent, and reports
// whether the key now holds the caller's claim: a lock with a fencing value.
// It also reports true when the key already holds value, so a command
// re-sent after a timeout is not mistaken for a rival: values must be
// unique to their caller.
func (r *Redis) SetNX(ctx context.Context, key string, value []byte, ttl time.Duration) (bool, error) {
	n, err := setIfAbsentOrOwn.Run(ctx, r.client, []string{r.prefix + key}, value, ttl.Milliseconds()).Int()
	if err != nil {
		return false, unavailable("setnx", err)
	}
	return n == 1, nil
}

// setIfAbsentOrOwn sets KEYS[1] to ARGV[1] for ARGV[2] ms when it is absent,
// and reports 1 also when it already holds ARGV[1]. go-redis sends a command
// again after a read timeout; a plain SET NX whose first send did land
// would then find its own value and report "taken", and its caller would
// wait for a lock it holds. With a value unique to the caller the second
// send recognises its own claim.
var setIfAbsentOrOwn = redis.NewScript(`
local v = redis.call("GET", KEYS[1])
if not v then
  redis.call("SET", KEYS[1], ARGV[1], "PX", ARGV[2])
  return 1
end
if v == ARGV[1] then return 1 end
return 0
`)

// DelIf deletes key only when its value starts with prefix (a whole value
// is its own prefix), atomically, and reports whether it did. It releases a
// lock only for its owner, and drops a cached value only if it is still the
// one the caller saw.
func (r *Redis) DelIf(ctx context.Context, key string, prefix []byte) (bool, error) {
	n, err := delIfPrefix.Run(ctx, r.client, []string{r.prefix + key}, prefix).Int()
	if err != nil {
		return false, unavailable("delif", err)
	}
	return n == 1, nil
}

// Publish sends msg on channel (under the key prefix).
func (r *Redis) Publish(ctx context.Context, channel, msg string) error {
	if err := r.client.Publish(ctx, r.prefix+channel, msg).Err(); err != nil {
		return unavailable("publish", err)
	}
	return nil
}

// Subscribe delivers every message on channel to onMessage until ctx ends.
// onReset is called whenever messages may have been missed (the connection
// dropped) and again once the subscription is back, so callers drop what a
// missed message could have invalidated; onReady(true) marks the
// subscription live, onReady(false) lost. It blocks; run it in a goroutine.
func (r *Redis) Subscribe(ctx context.Context, channel string, onMessage func(string), onReady func(bool)) {
	ps := r.client.Subscribe(ctx, r.prefix+channel)
	defer ps.Close()
	// Receive's read has no deadline: closing the subscription is what
	// ends a wait for the next message when ctx ends.
	stop := context.AfterFunc(ctx, func() { _ = ps.Close() })
	defer stop()
	backoff := 50 * time.Millisecond
	for {
		m, err := ps.Receive(ctx)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			onReady(false)
			t := time.NewTimer(backoff)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			backoff = min(2*backoff, 2*time.Second)
			continue
		}
		switch m := m.(type) {
		case *redis.Subscription:
			if m.Kind == "subscribe" {
				backoff = 50 * time.Millisecond
				onReady(true)
			}
		case *redis.Message:
			onMessage(m.Payload)
		}
	}
}

// GetDel returns the value at key and deletes it atomically (single use),
// or ErrNotFound.
func (r *Redis) GetDel(ctx context.Context, key string) ([]byte, error) {
	b, err := r.client.GetDel(ctx, r.prefix+key).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, unavailable("getdel", err)
	}
	return b, nil
}

// SAdd adds member to the set at key and makes the set live at least ttl.
func (r *Redis) SAdd(ctx context.Context, key, member string, ttl time.Duration) error {
	k := r.prefix + key
	_, err := r.client.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.SAdd(ctx, k, member)
		p.ExpireNX(ctx, k, ttl)
		p.ExpireGT(ctx, k, ttl)
		return nil
	})
	if err != nil {
		return unavailable("sadd", err)
	}
	return nil
}

// SRem removes member from the set at key.
func (r *Redis) SRem(ctx context.Context, key, member string) error {
	if err := r.client.SRem(ctx, r.prefix+key, member).Err(); err != nil {
		return unavailable("srem", err)
	}
	return nil
}

// SMembers returns the members of the set at key (none when it is absent).
func (r *Redis) SMembers(ctx context.Context, key string) ([]string, error) {
	m, err := r.client.SMembers(ctx, r.prefix+key).Result()
	if err != nil {
		return nil, unavailable("smembers", err)
	}
	return m, nil
}

// SetLogger routes go-redis's own log lines (reconnects, sentinel
// switches) into log at debug level, instead of plain text on stderr.
func SetLogger(log *slog.Logger) {
	redis.SetLogger(redisLogger{log})
}

type redisLogger struct{ log *slog.Logger }

func (l redisLogger) Printf(ctx context.Context, format string, v ...any) {
	l.log.DebugContext(ctx, "redis client", slog.String("detail", fmt.Sprintf(format, v...)))
}
