package session_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fintech-bff/bff/internal/kv"
	"github.com/fintech-bff/bff/internal/session"
)

func TestStoreOutageIsUnavailable(t *testing.T) {
	m := session.NewManager(failingStore{}, session.Options{IdleTimeout: time.Hour, AbsoluteTimeout: 2 * time.Hour})
	if _, err := m.Lookup(context.Background(), "some-id"); !errors.Is(err, session.ErrUnavailable) {
		t.Fatalf("lookup: got %v, want ErrUnavailable", err)
	}
	if _, _, err := m.Create(context.Background(), session.New{UserID: "u", Method: session.MethodDev}); !errors.Is(err, session.ErrUnavailable) {
		t.Fatalf("create: got %v, want ErrUnavailable", err)
	}
}

type failingStore struct{}

func (failingStore) Get(context.Context, string) ([]byte, error) { return nil, kv.ErrUnavailable }
func (failingStore) Set(context.Context, string, []byte, time.Duration) error {
	return kv.ErrUnavailable
}
func (failingStore) SetIfExists(context.Context, string, []byte, time.Duration) (bool, error) {
	return false, kv.ErrUnavailable
}
func (failingStore) Del(context.Context, string) error { return kv.ErrUnavailable }
func (failingStore) SAdd(context.Context, string, string, time.Duration) error {
	return kv.ErrUnavailable
}
func (failingStore) SRem(context.Context, string, string) error { return kv.ErrUnavailable }
func (failingStore) SMembers(context.Context, string) ([]string, error) {
	return nil, kv.ErrUnavailable
}
func (failingStore) Publish(context.Context, string, string) error { return kv.ErrUnavailable }
func (failingStore) Renew(context.Context, string, string, time.Duration, []string) ([]string, error) {
	return nil, kv.ErrUnavailable
}
func (failingStore) Expect(context.Context, string, string, string) ([]kv.MemberLease, error) {
	return nil, kv.ErrUnavailable
}
func (failingStore) Ack(context.Context, string, string, string) error { return kv.ErrUnavailable }
func (failingStore) Subscribe(ctx context.Context, _ string, _ func(string), _ func(bool)) {
	<-ctx.Done()
}
