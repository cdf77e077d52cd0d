package console

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// A login is a session kept in Redis, one hash per login under
//
//	<QueuePrefix>:console:session:<SHA-256 of the session ID, hex>
//
// with the fields end (absolute expiry), seen (last use), both Unix ms by
// the console's clock, csrf (the form token bound to the session) and tok
// (an HMAC of the session ID keyed by the console's token: a login made
// with a token the console no longer has, one changed after a leak, say,
// is no login). The cookie carries only the session ID: 256 random bits,
// new at every login, never stored (a reader of Redis gets no cookie, and
// without the ID tok tells nothing about the token). The key's TTL
// follows the idle expiry, so an abandoned login leaves nothing behind;
// whether a login is valid is decided by end, seen and tok, not by the TTL.
// Logout deletes the hash, so the cookie is worthless from then on.

// session is a valid login of the request.
type session struct {
	id   string // the cookie's value
	csrf string // the form token of every change made under it
}

// sessionTouch is how stale seen may be before a request writes it
// again: a page and its style sheet do not cost a write each.
const sessionTouch = time.Second

func (s *Console) sessionKey(id string) string {
	sum := sha256.Sum256([]byte(id))
	return s.cfg.queuePrefix + ":console:session:" + hex.EncodeToString(sum[:])
}

// newSession stores a fresh session and returns it.
func (s *Console) newSession(ctx context.Context) (*session, error) {
	sess := &session{id: randomHex(32), csrf: randomHex(16)}
	now := s.cfg.now()
	end := now.Add(s.cfg.session)
	key := s.sessionKey(sess.id)
	_, err := s.cfg.client.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.HSet(ctx, key, "end", end.UnixMilli(), "seen", now.UnixMilli(), "csrf", sess.csrf, "tok", s.tokenTag(sess.id))
		p.PExpire(ctx, key, min(s.cfg.idle, s.cfg.session))
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("storing the session: %w", err)
	}
	return sess, nil
}

// tokenTag binds a session ID to the console's token (the tok field).
func (s *Console) tokenTag(id string) string {
	m := hmac.New(sha256.New, []byte(s.cfg.token))
	m.Write([]byte("tierset console session\x00" + id))
	return hex.EncodeToString(m.Sum(nil))
}

// loadSession returns the valid session the request's cookie names (nil
// when there is none: no cookie, unknown, logged out, past its absolute
// or idle expiry, made under another token) and marks it used. An
// expired one, or one of another token, is deleted.
func (s *Console) loadSession(ctx context.Context, r *http.Request) (*session, error) {
	c, err := r.Cookie(s.cookieName(r, authCookie))
	if err != nil || len(c.Value) != 64 {
		return nil, nil
	}
	key := s.sessionKey(c.Value)
	v, err := s.cfg.client.HMGet(ctx, key, "end", "seen", "csrf", "tok").Result()
	if err != nil {
		return nil, fmt.Errorf("reading the session: %w", err)
	}
	end, okEnd := msField(v[0])
	seen, okSeen := msField(v[1])
	csrf, _ := v[2].(string)
	if !okEnd || !okSeen || len(csrf) != 32 {
		return nil, nil // none, or a hash a touch re-created after a logout
	}
	tok, _ := v[3].(string)
	now := s.cfg.now()
	if !now.Before(end) || now.Sub(seen) >= s.cfg.idle || !equal(tok, s.tokenTag(c.Value)) {
		if err := s.cfg.client.Del(ctx, key).Err(); err != nil {
			return nil, fmt.Errorf("deleting an expired session: %w", err)
		}
		return nil, nil
	}
	if now.Sub(seen) >= sessionTouch {
		// A logout between the read and this write re-creates the hash
		// with seen alone: without end it is no session, and its TTL
		// removes it.
		_, err := s.cfg.client.Pipelined(ctx, func(p redis.Pipeliner) error {
			p.HSet(ctx, key, "seen", now.UnixMilli())
			p.PExpire(ctx, key, min(s.cfg.idle, end.Sub(now)))
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("touching the session: %w", err)
		}
	}
	return &session{id: c.Value, csrf: csrf}, nil
}

func msField(v any) (time.Time, bool) {
	str, ok := v.(string)
	if !ok {
		return time.Time{}, false
	}
	ms, err := strconv.ParseInt(str, 10, 64)
	if err != nil {
		return time.Time{}, false
	}
	return time.UnixMilli(ms), true
}

// dropSession deletes a session (logout, or the one a new login replaces).
func (s *Console) dropSession(ctx context.Context, id string) error {
	if err := s.cfg.client.Del(ctx, s.sessionKey(id)).Err(); err != nil {
		return fmt.Errorf("deleting the session: %w", err)
	}
	return nil
}

// sessionCtx carries the request's session (nil: none) from the guard to
// the handlers, so a request reads Redis for it once.
type sessionCtx struct{}

func withSession(r *http.Request, sess *session) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), sessionCtx{}, sess))
}

func sessionOf(r *http.Request) *session {
	sess, _ := r.Context().Value(sessionCtx{}).(*session)
	return sess
}
