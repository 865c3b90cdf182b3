package session

import (
	"context"
	"errors"
)

// Listing and ending sessions: logout, logout everywhere, the operator's
// and the back-channel revocations.

// Reason is why sessions were ended before their timeout: the value of
// bff_session_revocations_total{reason}, named once here rather than
// spelled at each call.
type Reason string

// The reasons.
const (
	ReasonLogout      Reason = "logout"      // the session's own logout
	ReasonUser        Reason = "user"        // the user ended one of their sessions, or all of them
	ReasonAdmin       Reason = "admin"       // the operator revoked a user's sessions
	ReasonBackchannel Reason = "backchannel" // the provider's back-channel logout
)

// Delete ends the session named by id everywhere. It returns once no
// instance can serve it (nearcache's Announce).
func (m *Manager) Delete(ctx context.Context, id string) error {
	return m.deleteHandle(ctx, Handle(id))
}

func (m *Manager) deleteHandle(ctx context.Context, handle string) error {
	if err := m.end(ctx, handle); err != nil {
		return err
	}
	return m.local.Announce(ctx, []string{handle})
}

// end ends the session with this handle in the store: its record is
// deleted, this instance's copy forgotten and, when its record is known,
// its handle removed from its indexes. The caller announces it.
func (m *Manager) end(ctx context.Context, handle string) error {
	rec, err := m.get(ctx, handle)
	if err != nil && !errors.Is(err, ErrNotFound) {
		return err
	}
	return m.endRecord(ctx, handle, rec, err == nil)
}

// endRecord deletes the record and forgets this instance's copy, and
// removes the handle from the record's indexes when it is known; the other
// instances learn it from the announcement.
func (m *Manager) endRecord(ctx context.Context, handle string, rec Record, known bool) error {
	if err := m.store.Del(ctx, handleKey(handle)); err != nil {
		return err
	}
	m.forgetEnded(handle)
	if known {
		for _, ix := range indexes(rec) {
			_ = m.store.SRem(ctx, ix, handle)
		}
	}
	return nil
}

// Info describes one of a user's sessions; Handle is its public name.
type Info struct {
	Handle string
	Record
}

// List returns the user's live sessions, pruning index entries of ended ones.
func (m *Manager) List(ctx context.Context, userID string) ([]Info, error) {
	return m.listIndex(ctx, indexKey("user", userID))
}

func (m *Manager) listIndex(ctx context.Context, ix string) ([]Info, error) {
	handles, err := m.store.SMembers(ctx, ix)
	if err != nil {
		return nil, err
	}
	out := make([]Info, 0, len(handles))
	for _, h := range handles {
		rec, err := m.get(ctx, h)
		switch {
		case errors.Is(err, ErrNotFound):
			_ = m.store.SRem(ctx, ix, h)
		case err != nil:
			return nil, err
		default:
			out = append(out, Info{Handle: h, Record: rec})
		}
	}
	return out, nil
}

// DeleteForUser ends the session with this handle if it is the user's; it
// reports whether there was one.
func (m *Manager) DeleteForUser(ctx context.Context, userID, handle string) (bool, error) {
	rec, err := m.get(ctx, handle)
	if errors.Is(err, ErrNotFound) || (err == nil && rec.UserID != userID) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return true, m.deleteHandle(ctx, handle)
}

// RevokeUser ends every session of a user and returns how many.
func (m *Manager) RevokeUser(ctx context.Context, userID string) ([]Info, error) {
	return m.revokeIndex(ctx, indexKey("user", userID))
}

// RevokeProvider ends the sessions of an OpenID provider session (sid) or,
// without sid, of a provider subject (sub): back-channel logout.
func (m *Manager) RevokeProvider(ctx context.Context, sub, sid string) ([]Info, error) {
	if sid != "" {
		return m.revokeIndex(ctx, indexKey("sid", sid))
	}
	return m.revokeIndex(ctx, indexKey("sub", sub))
}

func (m *Manager) revokeIndex(ctx context.Context, ix string) ([]Info, error) {
	list, err := m.listIndex(ctx, ix)
	if err != nil {
		return nil, err
	}
	handles := make([]string, 0, len(list))
	for _, in := range list {
		if err := m.end(ctx, in.Handle); err != nil {
			// Those already ended still must not be served anywhere.
			return nil, errors.Join(err, m.local.Announce(ctx, handles))
		}
		handles = append(handles, in.Handle)
	}
	// One announcement for them all: one wait, however many sessions.
	return list, m.local.Announce(ctx, handles)
}
