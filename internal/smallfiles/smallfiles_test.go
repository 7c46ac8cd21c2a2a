package smallfiles

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestNewTree: the tree is the same every time, its sizes follow the
// quantile table (median near 1661 bytes, none above 16 KiB), its
// directories nest several levels deep with about FilesPerDir files each,
// and a byte cap keeps the first files that fit.
func TestNewTree(t *testing.T) {
	a, b := NewTree(Spec{Files: 2000}), NewTree(Spec{Files: 2000})
	if !slices.Equal(a.Sizes, b.Sizes) || !slices.Equal(a.Dirs, b.Dirs) {
		t.Fatal("two trees of one spec differ")
	}
	if len(a.Sizes) != 2000 || len(a.Dirs) != 400 {
		t.Fatalf("%d files in %d dirs, want 2000 in 400", len(a.Sizes), len(a.Dirs))
	}
	sorted := slices.Clone(a.Sizes)
	slices.Sort(sorted)
	if med := sorted[len(sorted)/2]; med < 1450 || med > 1900 || sorted[len(sorted)-1] > MaxFileBytes || sorted[0] < 0 {
		t.Errorf("sizes: median %d, range %d..%d; want a median near 1661 within 0..%d", med, sorted[0], sorted[len(sorted)-1], MaxFileBytes)
	}
	depth := 0
	for _, d := range a.Dirs {
		depth = max(depth, strings.Count(d, "/")+1)
	}
	if depth < 4 || depth > 8 {
		t.Errorf("tree depth %d, want 4-8 like a package tree", depth)
	}
	capped := NewTree(Spec{Files: 2000, MaxBytes: a.Bytes() / 2})
	if capped.Bytes() > a.Bytes()/2 || len(capped.Sizes) < 500 || !slices.Equal(capped.Sizes, a.Sizes[:len(capped.Sizes)]) {
		t.Errorf("capped at %d bytes: %d files, %d bytes", a.Bytes()/2, len(capped.Sizes), capped.Bytes())
	}
}

// TestRun: an execution times every operation and leaves nothing behind,
// also over the leftover of a killed one.
func TestRun(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, TreeName, "d1"), 0o755); err != nil {
		t.Fatal(err)
	}
	res, err := Run(dir, Spec{Files: 300})
	if err != nil {
		t.Fatal(err)
	}
	var binned uint64
	for _, n := range res.Bins {
		binned += n
	}
	if res.Files != 300 || res.Ops != 3*300+2*res.Dirs || binned != uint64(res.Ops) || !(res.Seconds > 0) ||
		res.Bytes != NewTree(Spec{Files: 300}).Bytes() || len(res.Phase) != 5 {
		t.Errorf("result %+v", res)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("left behind: %v", entries)
	}
	for _, bad := range []Spec{{Files: 0}, {Files: MaxFiles + 1}, {Files: 10, MaxBytes: 1}} {
		if _, err := Run(dir, bad); err == nil {
			t.Errorf("Run(%+v): want an error", bad)
		}
	}
}
