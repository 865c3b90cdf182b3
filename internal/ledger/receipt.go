package ledger

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
)

// Approval is what a user's approval proved (step-up), kept with the
// payment it released: the authentication's class and time, and a hash of
// the authorization_details the provider granted. None of it is secret.
type Approval struct {
	ACR      string    `json:"acr"`
	AuthTime time.Time `json:"authTime"`
	// DetailsSHA256 is the base64url SHA-256 of the granted details'
	// canonical JSON (RFC 8785).
	DetailsSHA256 string `json:"detailsSha256"`
}

// column is the approval as migration 007's column holds it; nil for
// none.
func (a Approval) column() []byte {
	if a == (Approval{}) {
		return nil
	}
	b, _ := json.Marshal(a)
	return b
}

// Facts are what the ledger knows of one money request, for its receipt.
type Facts struct {
	Entry
	// Content is the payment the BFF sent (its own encoding), opened;
	// nil when the request creates nothing.
	Content []byte
	// FinishedAt is when the request was answered or ended (zero: open).
	FinishedAt time.Time
	// StatusAt is when PaymentStatus was seen (zero: none yet).
	StatusAt time.Time
	// Approval is the user's approval of a held payment; nil for a payment
	// never held, or held and never approved.
	Approval *Approval
}

// factsColumns are Facts's columns after entryColumns. approval is the
// current attempt's: Approve writes it with a hold's release, and a claim
// of a key given back clears it (an earlier attempt's approval is not the
// next one's).
const factsColumns = `, content, finished_at, status_at, approval`

// Facts reads the user's request with key (the newest, as Get), with what
// its receipt states; ok is false when there is none.
func (p *Postgres) Facts(ctx context.Context, userID, key string) (Facts, bool, error) {
	var f Facts
	var content, approval []byte
	var finished, statusAt *time.Time
	row := p.pool.QueryRow(ctx, `SELECT `+entryColumns+factsColumns+` FROM money_requests
WHERE user_id = $1 AND idem_key = $2 AND state <> 'released'
ORDER BY created_at DESC, id DESC LIMIT 1`, userID, key)
	e, err := p.scanEntry(scanMore{row, []any{&content, &finished, &statusAt, &approval}})
	if errors.Is(err, pgx.ErrNoRows) {
		return Facts{}, false, nil
	}
	if err != nil {
		return Facts{}, false, unavailable(err)
	}
	f.Entry = e
	if f.Content, err = p.openContent(userID, e.Route, e.Key, content); err != nil {
		return Facts{}, false, err
	}
	if finished != nil {
		f.FinishedAt = *finished
	}
	if statusAt != nil {
		f.StatusAt = *statusAt
	}
	if f.Approval, err = approvalOf(approval); err != nil {
		return Facts{}, false, err
	}
	return f, true, nil
}

// scanMore scans a row's columns after those scanEntry reads into more.
type scanMore struct {
	row  pgx.Row
	more []any
}

func (s scanMore) Scan(dest ...any) error { return s.row.Scan(append(dest, s.more...)...) }

// approvalOf reads the approval column; nil for none.
func approvalOf(b []byte) (*Approval, error) {
	if b == nil {
		return nil, nil
	}
	var a Approval
	if err := json.Unmarshal(b, &a); err != nil {
		return nil, ErrUnreadable
	}
	return &a, nil
}

// Facts is Postgres.Facts.
func (m *Memory) Facts(_ context.Context, userID, key string) (Facts, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var best *memRecord
	for _, r := range m.byID {
		if r.UserID != userID || r.Key != key || r.State == StateReleased {
			continue
		}
		if best == nil || newer(m.entry(r).Cursor(), m.entry(best).Cursor()) {
			best = r
		}
	}
	if best == nil {
		return Facts{}, false, nil
	}
	f := Facts{Entry: m.entry(best), FinishedAt: best.finished, StatusAt: best.statusAt}
	var err error
	if f.Content, err = m.sealer.openContent(userID, best.Route, best.Key, best.content); err != nil {
		return Facts{}, false, err
	}
	if f.Approval, err = approvalOf(best.approval); err != nil {
		return Facts{}, false, err
	}
	return f, true, nil
}
