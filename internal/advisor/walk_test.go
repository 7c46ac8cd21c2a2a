package advisor

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/layerprobe/layerprobe/api"
)

// writeFile creates path (and its parents) with n bytes and the given
// modification time.
func writeFile(t *testing.T, path string, n int, mtime time.Time) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, make([]byte, n), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(path, mtime, mtime); err != nil {
		t.Fatal(err)
	}
}

func TestWalkCountsFilesOnce(t *testing.T) {
	root := t.TempDir()
	old := time.Now().Add(-time.Hour)
	start := time.Now().Add(-time.Minute)
	writeFile(t, filepath.Join(root, "data/out/blob"), 3000, time.Now())
	writeFile(t, filepath.Join(root, "data/old"), 500, old)
	writeFile(t, filepath.Join(root, "etc/conf"), 20, old)
	// A hard link is one file; a symbolic link counts as itself and is
	// never followed, even to a big file outside the tree.
	if err := os.Link(filepath.Join(root, "data/out/blob"), filepath.Join(root, "data/blob-link")); err != nil {
		t.Fatal(err)
	}
	outside := t.TempDir()
	writeFile(t, filepath.Join(outside, "huge"), 1<<20, time.Now())
	if err := os.Symlink(outside, filepath.Join(root, "escape")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "huge"), filepath.Join(root, "data/huge-link")); err != nil {
		t.Fatal(err)
	}

	b := &budget{maxEntries: 1000, deadline: time.Now().Add(time.Minute), now: time.Now}
	r := walkTree(root, start, b, true)
	links := int64(len(outside)) + int64(len(filepath.Join(outside, "huge")))
	if want := int64(3000+500+20) + links; r.Bytes != want {
		t.Errorf("Bytes = %d, want %d (files once, symlinks as their own size)", r.Bytes, want)
	}
	if want := int64(3000) + links; r.Since != want {
		t.Errorf("Since = %d, want %d (files modified since the start)", r.Since, want)
	}
	if r.Stop != "" {
		t.Errorf("Stop = %q, want a complete walk", r.Stop)
	}
	// data, out, blob, old, blob-link, huge-link, etc, conf, escape
	if r.Entries != 9 || b.walked() != 9 {
		t.Errorf("Entries = %d (budget %d), want 9", r.Entries, b.walked())
	}
	paths := topPaths(r.tree, 3)
	if len(paths) == 0 || paths[0].Path != "/data" {
		t.Errorf("topPaths = %+v, want /data first", paths)
	}
}

func TestWalkStopsAtItsCaps(t *testing.T) {
	root := t.TempDir()
	for i := range 300 {
		writeFile(t, filepath.Join(root, "d", "f"+string(rune('a'+i%26))+string(rune('a'+i/26))), 10, time.Now())
	}
	b := &budget{maxEntries: 100, now: time.Now}
	r := walkTree(root, time.Time{}, b, false)
	if r.Stop != stopEntries || b.hit != stopEntries || b.walked() != 100 {
		t.Errorf("Stop %q, hit %q, walked %d; want the entry cap at 100", r.Stop, b.hit, b.walked())
	}
	if r.Bytes <= 0 || r.Bytes >= 3000 {
		t.Errorf("Bytes = %d, want a lower bound between 0 and 3000", r.Bytes)
	}
	// The budget is shared: a second walk of the same container stops at
	// once.
	if r2 := walkTree(root, time.Time{}, b, false); r2.Stop != stopEntries || r2.Entries != 0 {
		t.Errorf("second walk on a spent budget = %+v", r2)
	}

	clock := time.Now()
	b = &budget{maxEntries: 0, deadline: clock.Add(time.Second), now: func() time.Time { clock = clock.Add(600 * time.Millisecond); return clock }}
	if r := walkTree(root, time.Time{}, b, false); r.Stop != stopTime || r.Entries >= 300 {
		t.Errorf("with a deadline: Stop %q after %d entries, want the time cap before the end", r.Stop, r.Entries)
	}
}

func TestWalkOfAFileAndOfNothing(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "docker.sock-like-file")
	writeFile(t, f, 123, time.Now())
	if r := walkTree(f, time.Time{}, &budget{now: time.Now}, false); r.Bytes != 123 || r.Stop != "" || r.Entries != 1 {
		t.Errorf("walk of a file = %+v", r)
	}
	if r := walkTree(filepath.Join(dir, "missing"), time.Time{}, &budget{now: time.Now}, false); r.Stop != stopError {
		t.Errorf("walk of a missing path = %+v, want stop %q", r, stopError)
	}
}

// tree builds a node tree from paths and their sizes.
func tree(sizes map[string]int64) *node {
	root := &node{name: "/"}
	for p, n := range sizes {
		cur := root
		cur.bytes += n
		dir := filepath.Dir(p)
		if dir == "/" {
			continue
		}
		for _, part := range splitPath(dir) {
			if cur.children == nil {
				cur.children = map[string]*node{}
			}
			next := cur.children[part]
			if next == nil {
				next = &node{name: part}
				cur.children[part] = next
			}
			next.bytes += n
			cur = next
		}
	}
	return root
}

func splitPath(p string) []string {
	var out []string
	for p != "/" && p != "." {
		out = append([]string{filepath.Base(p)}, out...)
		p = filepath.Dir(p)
	}
	return out
}

func TestTopPaths(t *testing.T) {
	for _, c := range []struct {
		name  string
		files map[string]int64
		want  []api.PathBytes
	}{
		{"one deep directory", map[string]int64{"/var/lib/postgresql/data/base/1": 700, "/var/lib/postgresql/data/pg_wal/1": 250, "/var/lib/postgresql/data/PG_VERSION": 50},
			[]api.PathBytes{{Path: "/var/lib/postgresql/data", Bytes: 1000}}},
		{"two places", map[string]int64{"/a/x": 500, "/b/y/z": 400, "/c": 100},
			[]api.PathBytes{{Path: "/a", Bytes: 500}, {Path: "/b/y", Bytes: 400}, {Path: "/", Bytes: 100}}},
		{"noise left out", map[string]int64{"/data/out/blob": 990, "/tmp/x": 10},
			[]api.PathBytes{{Path: "/data/out", Bytes: 990}}},
		{"files in the root only", map[string]int64{"/blob": 10},
			[]api.PathBytes{{Path: "/", Bytes: 10}}},
		{"nothing", map[string]int64{}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := topPaths(tree(c.files), 3)
			if !slices.Equal(got, c.want) {
				t.Errorf("topPaths = %+v, want %+v", got, c.want)
			}
		})
	}
	if got := topPaths(tree(map[string]int64{"/a/1": 30, "/b/1": 30, "/c/1": 30, "/d/1": 10}), 2); len(got) != 2 {
		t.Errorf("k = 2 gave %d paths: %+v", len(got), got)
	}
}
