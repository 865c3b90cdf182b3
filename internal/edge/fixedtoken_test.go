package edge

import (
	"context"
	"time"

	"github.com/fintech-bff/bff/internal/tokens"
)

// staticSource serves one token for every user, valid for an hour.
type staticSource struct{}

func (staticSource) Token(context.Context, string) (tokens.Token, error) {
	return tokens.Token{Value: "upstream-token", Expiry: time.Now().Add(time.Hour)}, nil
}

// fixedToken is staticSource as the proxy's token source; it never drops one.
type fixedToken struct{ staticSource }

func (fixedToken) InvalidateToken(context.Context, string, string) error { return nil }
