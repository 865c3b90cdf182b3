package kv

import (
	"context"
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// A group is the instances that keep local copies of some keys, each a
// member with a lease on the store's clock: the rule Chubby uses for its
// client caches (Burrows, OSDI 2006). This is the store's side; the
// members' side (the renewal, the trust, the announcement and its wait) is
// internal/nearcache's members.go. A writer that ends what members may
// hold calls Expect, which marks the invalidation pending for every member
// whose lease has not run out and returns them with the time left; each
// member Acks it once it forgot its copies. A member's Renew is refused
// while invalidations are pending for it, so a member that missed one
// (its subscription cut, a frozen process) cannot keep its lease past the
// one it had: the writer waits for every ack or that lease, whichever
// comes first, and then no member can still trust a copy.
//
// The group's keys share a hash tag, so its scripts run on one Cluster
// node.

// MemberLease is a member of a group and the time left on its lease when
// Expect read it.
type MemberLease struct {
	Member string
	Left   time.Duration
}

// Members is the group membership a store offers (Redis, Memory).
type Members interface {
	Renew(ctx context.Context, group, member string, lease time.Duration, done []string) ([]string, error)
	Expect(ctx context.Context, group, self, id string) ([]MemberLease, error)
	Ack(ctx context.Context, group, member, id string) error
}

var (
	_ Members = (*Redis)(nil)
	_ Members = (*Memory)(nil)
)

// pendingTTL bounds how long a dead member's pending set stays.
const pendingTTL = time.Minute

func membersKey(group string) string { return "{" + group + "}:members" }
func pendingKey(group string) string { return "{" + group + "}:pending:" }

// renewScript: KEYS[1] the members, KEYS[2] the member's pending set;
// ARGV[1] the member, ARGV[2] the lease (ms), ARGV[3..] the pending ids it
// handled. It removes those, and renews the lease only when nothing else is
// pending; it returns what is still pending.
var renewScript = redis.NewScript(`
for i = 3, #ARGV do redis.call('SREM', KEYS[2], ARGV[i]) end
local left = redis.call('SMEMBERS', KEYS[2])
if #left > 0 then return left end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
redis.call('PEXPIRE', KEYS[1], 60000 + tonumber(ARGV[2]))
return {}
`)

// expectScript: KEYS[1] the members; ARGV[1] the caller, ARGV[2] the id,
// ARGV[3] the pending sets' key prefix, ARGV[4] their ttl (ms). It returns
// member, ms left, member, ms left, ...
var expectScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local r = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. now, '+inf', 'WITHSCORES')
local out = {}
for i = 1, #r, 2 do
  if r[i] ~= ARGV[1] then
    local k = ARGV[3] .. r[i]
    redis.call('SADD', k, ARGV[2])
    redis.call('PEXPIRE', k, ARGV[4])
    table.insert(out, r[i])
    table.insert(out, tostring(tonumber(r[i + 1]) - now))
  end
end
return out
`)

// Renew renews member's lease in group for lease (on the store's clock),
// after removing done from its pending invalidations, unless some are
// still pending: then it renews nothing and returns them, and the caller
// forgets every copy they could name before calling again with them as done.
func (r *Redis) Renew(ctx context.Context, group, member string, lease time.Duration, done []string) ([]string, error) {
	args := make([]any, 0, 2+len(done))
	args = append(args, member, lease.Milliseconds())
	for _, d := range done {
		args = append(args, d)
	}
	keys := []string{r.prefix + membersKey(group), r.prefix + pendingKey(group) + member}
	pending, err := renewScript.Run(ctx, r.client, keys, args...).StringSlice()
	if err != nil {
		return nil, unavailable("renew", err)
	}
	return pending, nil
}

// Expect marks invalidation id pending for every member of group whose
// lease has not run out, but self, and returns them with the time left on
// their lease.
func (r *Redis) Expect(ctx context.Context, group, self, id string) ([]MemberLease, error) {
	res, err := expectScript.Run(ctx, r.client, []string{r.prefix + membersKey(group)},
		self, id, r.prefix+pendingKey(group), pendingTTL.Milliseconds()).StringSlice()
	if err != nil {
		return nil, unavailable("expect", err)
	}
	out := make([]MemberLease, 0, len(res)/2)
	for i := 0; i+1 < len(res); i += 2 {
		ms, _ := strconv.ParseInt(res[i+1], 10, 64)
		out = append(out, MemberLease{Member: res[i], Left: time.Duration(ms) * time.Millisecond})
	}
	return out, nil
}

// Ack removes invalidation id from member's pending ones.
func (r *Redis) Ack(ctx context.Context, group, member, id string) error {
	if err := r.client.SRem(ctx, r.prefix+pendingKey(group)+member, id).Err(); err != nil {
		return unavailable("ack", err)
	}
	return nil
}

// memGroup is a group in the in-process store.
type memGroup struct {
	leases  map[string]time.Time
	pending map[string][]string
}

func (m *Memory) group(name string) *memGroup {
	if m.groups == nil {
		m.groups = map[string]*memGroup{}
	}
	g, ok := m.groups[name]
	if !ok {
		g = &memGroup{leases: map[string]time.Time{}, pending: map[string][]string{}}
		m.groups[name] = g
	}
	return g
}

// Renew is Redis.Renew in process.
func (m *Memory) Renew(_ context.Context, group, member string, lease time.Duration, done []string) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	g := m.group(group)
	g.pending[member] = slices.DeleteFunc(g.pending[member], func(id string) bool { return slices.Contains(done, id) })
	if len(g.pending[member]) > 0 {
		return slices.Clone(g.pending[member]), nil
	}
	now := m.now()
	g.leases[member] = now.Add(lease)
	for k, until := range g.leases {
		if !until.After(now) {
			delete(g.leases, k)
		}
	}
	return nil, nil
}

// Expect is Redis.Expect in process.
func (m *Memory) Expect(_ context.Context, group, self, id string) ([]MemberLease, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	g := m.group(group)
	now := m.now()
	var out []MemberLease
	for member, until := range g.leases {
		if member == self || !until.After(now) {
			continue
		}
		g.pending[member] = append(g.pending[member], id)
		out = append(out, MemberLease{Member: member, Left: until.Sub(now)})
	}
	return out, nil
}

// Ack is Redis.Ack in process.
func (m *Memory) Ack(_ context.Context, group, member, id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	g := m.group(group)
	g.pending[member] = slices.DeleteFunc(g.pending[member], func(p string) bool { return p == id })
	return nil
}
