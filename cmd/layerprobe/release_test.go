package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/layerprobe/layerprobe/internal/testsupport/testharness"
)

// The binary `make build` builds has no test hooks: no LAYERPROBE_TEST_*
// variable reaches it. The one built with them (the tests', the
// benchmark's) has them, so the check can fail.
func TestReleaseBinaryHasNoTestHooks(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary twice")
	}
	mk, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^GO_TAGS\s*\?=[ \t]*(\S*)[ \t]*$`).FindSubmatch(mk)
	if m == nil || string(m[1]) != testharness.ReleaseTags {
		t.Fatalf("the Makefile's GO_TAGS %q, testharness.ReleaseTags %q: they must agree", m, testharness.ReleaseTags)
	}
	dir := t.TempDir()
	for _, tc := range []struct {
		tags      string
		wantHooks bool
	}{{testharness.ReleaseTags, false}, {testharness.HookTags, true}} {
		bin := filepath.Join(dir, "layerprobe")
		if err := testharness.Build(context.Background(), bin, tc.tags); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(bin)
		if err != nil {
			t.Fatal(err)
		}
		if got := bytes.Contains(b, []byte("LAYERPROBE_TEST_")); got != tc.wantHooks {
			t.Errorf("built with -tags %s: holds LAYERPROBE_TEST_ %v, want %v", tc.tags, got, tc.wantHooks)
		}
	}
}
