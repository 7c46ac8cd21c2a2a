package version

import (
	"runtime"
	"strings"
	"testing"
)

func TestStringShape(t *testing.T) {
	oldV, oldR, oldD := Version, Revision, BuildDate
	t.Cleanup(func() { Version, Revision, BuildDate = oldV, oldR, oldD })
	Version, Revision, BuildDate = "0.1.0", "0123456789ab", "2026-11-28T00:00:00Z"
	lines := strings.Split(String(), "\n")
	if lines[0] != "layerprobe, version 0.1.0 (revision: 0123456789ab)" {
		t.Errorf("first line %q", lines[0])
	}
	want := []string{"build date:       2026-11-28T00:00:00Z", "go version:       " + runtime.Version(),
		"platform:         " + runtime.GOOS + "/" + runtime.GOARCH, "tags:"}
	if len(lines) != 1+len(want) {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), 1+len(want), String())
	}
	for i, w := range want {
		if !strings.HasPrefix(strings.TrimSpace(lines[i+1]), w) {
			t.Errorf("line %d %q, want it to start with %q", i+2, lines[i+1], w)
		}
	}
}
