// Package testharness is what the end-to-end suites (test/e2e, test/faults,
// test/ops) and the benchmarks (bench) share to drive the layerprobe binary
// from outside: the binary built once the way `make build` builds it, free
// ports, child processes with their output collected, polling until
// something holds, and /metrics scraped and searched. The unit tests share
// its smaller pieces too: a locked buffer, a logger to t.Log, and skipping
// (or failing in CI) without a prerequisite.
//
// It is for tests only; nothing in the shipped binary imports it.
package testharness

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// MustFreePort is FreePort for a test: it fails t instead of returning an
// error.
func MustFreePort(t testing.TB) int {
	t.Helper()
	p, err := FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// Buffer is a bytes.Buffer safe for concurrent use: a child process's
// output written by exec.Cmd's copying goroutine while the test reads it.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write implements io.Writer.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// String returns everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// Tail returns the last n lines of s, for failure messages.
func Tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// Eventually calls cond every interval until it reports true, and fails t
// after timeout, saying what was awaited and cond's last note.
func Eventually(t testing.TB, timeout, interval time.Duration, what string, cond func() (ok bool, note string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, note := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			if note != "" {
				t.Fatalf("timed out after %s waiting until %s; last: %s", timeout, what, note)
			}
			t.Fatalf("timed out after %s waiting until %s", timeout, what)
		}
		time.Sleep(interval)
	}
}

// WaitFor is Eventually for a plain condition, polled every 100 ms.
func WaitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	Eventually(t, timeout, 100*time.Millisecond, what, func() (bool, string) { return cond(), "" })
}

// ErrExited is WaitHTTP's error when the process it waits for exits first.
var ErrExited = errors.New("the process exited")

// WaitHTTP polls url every 100 ms until it answers 200 OK. It gives up
// with ErrExited when exited (a process's Done channel; nil for none) is
// closed first, and with an error after timeout or when ctx ends.
func WaitHTTP(ctx context.Context, url string, timeout time.Duration, exited <-chan struct{}) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	client := &http.Client{Timeout: 5 * time.Second}
	var last string
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return fmt.Errorf("wait for %s: %w", url, err)
		}
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = resp.Status
		} else {
			last = err.Error()
		}
		select {
		case <-exited:
			return fmt.Errorf("wait for %s: %w", url, ErrExited)
		case <-ctx.Done():
			return fmt.Errorf("%s did not answer 200 within %s (last: %s): %w", url, timeout, last, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}
