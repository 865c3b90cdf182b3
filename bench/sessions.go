package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"
)

const cookieName = "bff_session"

// session is one logged-in user: the cookie value and the session token.
type session struct {
	user, cookie, token string
}

func (s session) cookieHeader() string { return cookieName + "=" + s.cookie }

var httpClient = &http.Client{
	Timeout: 10 * time.Second,
	Transport: &http.Transport{
		MaxIdleConns:        128,
		MaxIdleConnsPerHost: 128,
		IdleConnTimeout:     30 * time.Second,
	},
	// A cookie jar is never used: every request carries its session explicitly.
}

// login creates a session through POST /auth/dev/login.
func login(base, user string) (session, error) {
	body, _ := json.Marshal(map[string]string{"userId": user})
	resp, err := httpClient.Post(base+"/auth/dev/login", "application/json", bytes.NewReader(body))
	if err != nil {
		return session{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return session{}, fmt.Errorf("login %s: %s %s", user, resp.Status, b)
	}
	var reply struct {
		SessionToken string `json:"sessionToken"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&reply); err != nil {
		return session{}, fmt.Errorf("login %s: %w", user, err)
	}
	s := session{user: user, token: reply.SessionToken}
	for _, c := range resp.Cookies() {
		if c.Name == cookieName {
			s.cookie = c.Value
		}
	}
	if s.cookie == "" || s.token == "" {
		return s, fmt.Errorf("login %s: no %s cookie or no sessionToken", user, cookieName)
	}
	return s, nil
}

// call sends one request with the session's cookie (plus X-CSRF: 1 for
// unsafe methods) and returns the status.
func call(method, url string, s session) (int, error) {
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Cookie", s.cookieHeader())
	if method != http.MethodGet {
		req.Header.Set("X-CSRF", "1")
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

// loginMany logs in users prefix0..prefix(n-1) with bounded concurrency.
func loginMany(base, prefix string, n, workers int) ([]session, error) {
	out := make([]session, n)
	err := parallel(n, workers, func(i int) error {
		s, err := login(base, fmt.Sprintf("%s%d", prefix, i))
		out[i] = s
		return err
	})
	return out, err
}

// primeMany sends one GET per session so that each user's token is minted
// and cached.
func primeMany(url string, sessions []session, workers int) error {
	return parallel(len(sessions), workers, func(i int) error {
		code, err := call(http.MethodGet, url, sessions[i])
		if err == nil && code != http.StatusOK {
			err = fmt.Errorf("prime %s: status %d", sessions[i].user, code)
		}
		return err
	})
}

// parallel runs f(0..n-1) on workers goroutines and returns the first error.
func parallel(n, workers int, f func(i int) error) error {
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
		next     = make(chan int)
	)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := f(i); err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
				}
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	return firstErr
}

// writeLines writes one value per line, for the rotating wrk scripts.
func writeLines(path string, sessions []session, value func(session) string) error {
	var b strings.Builder
	for _, s := range sessions {
		b.WriteString(value(s))
		b.WriteByte('\n')
	}
	return os.WriteFile(path, []byte(b.String()), 0o600)
}
