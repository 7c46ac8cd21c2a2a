package testharness

import (
	"log/slog"
	"os"
	"strings"
	"testing"
)

// SkipOrFail skips t, except when the environment variable CI is set: a
// CI machine without a prerequisite is broken, and its tests must fail
// rather than pass by skipping.
func SkipOrFail(t testing.TB, format string, args ...any) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatalf(format+" (CI is set: not skipping)", args...)
	}
	t.Skipf(format, args...)
}

// HostFio is the real fio tests run where they need one: Debian's, which
// scripts/install-deps.sh installs.
const HostFio = "/usr/bin/fio"

// RequireFio returns HostFio, or skips t without it (SkipOrFail).
func RequireFio(t testing.TB) string {
	t.Helper()
	if _, err := os.Stat(HostFio); err != nil {
		SkipOrFail(t, "fio: %v", err)
	}
	return HostFio
}

// Logger is a debug-level logger whose lines go to t.Log, so that they
// show with the test that wrote them, and only when it fails or runs -v.
func Logger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
