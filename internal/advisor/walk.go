package advisor

import (
	"cmp"
	"errors"
	"io"
	"os"
	"path"
	"slices"
	"time"

	"golang.org/x/sys/unix"

	"github.com/layerprobe/layerprobe/api"
)

// Why a walk stopped short; "" when it saw everything.
const (
	stopEntries    = "entry_cap"  // walk_max_entries reached
	stopTime       = "time_cap"   // walk_max_time reached
	stopPermission = "permission" // a directory could not be read
	stopError      = "error"      // another error reading a directory
)

// maxDepth bounds the recursion (and the descriptors held open: one per
// level). No real layer is that deep; a deeper tree is counted as partial.
const maxDepth = 64

// treeDepth is how deep the walk keeps per-directory totals for naming the
// paths that grow: deeper bytes count towards their ancestor at this depth.
const treeDepth = 8

// budget bounds the walks of one container: entries visited and a
// deadline, shared by its layer and its mounts.
type budget struct {
	entries    int64
	maxEntries int64
	deadline   time.Time
	now        func() time.Time
	hit        string // the cap reached, "" while none is
}

// spend counts one entry and reports why the walk must stop, or "".
func (b *budget) spend() string {
	if b.hit != "" {
		return b.hit
	}
	b.entries++
	switch {
	case b.maxEntries > 0 && b.entries > b.maxEntries:
		b.hit = stopEntries
	// time.Now is cheap, but not free: look every 64 entries.
	case b.entries%64 == 0 && !b.deadline.IsZero() && b.now().After(b.deadline):
		b.hit = stopTime
	}
	return b.hit
}

// walked is how many entries the walks visited.
func (b *budget) walked() int64 {
	if b.maxEntries > 0 {
		return min(b.entries, b.maxEntries)
	}
	return b.entries
}

// node is a directory's subtree total, for directories down to treeDepth.
type node struct {
	name     string
	bytes    int64
	children map[string]*node
}

// walkResult is what one bounded walk found.
type walkResult struct {
	// Bytes is the apparent size of the regular files and symbolic links
	// (st_size, each hard-linked inode once), as the engine's SizeRw
	// counts them.
	Bytes int64
	// Since is the part of Bytes in files modified at or after the walk's
	// since time.
	Since   int64
	Entries int64
	// Stop says why the walk did not see everything ("" when it did).
	Stop string
	tree *node // nil unless asked for
}

// walker walks one directory tree without following symbolic links or
// crossing into other file systems: the trees belong to containers, whose
// processes control every name in them.
type walker struct {
	b     *budget
	since time.Time
	dev   uint64
	seen  map[uint64]bool // inodes with more than one link, counted once
	res   walkResult
}

// walkTree walks root within b. Files modified at or after since count
// towards Since; withTree keeps directory totals for topPaths. A root that
// is a file (a bind-mounted file) is measured alone.
func walkTree(root string, since time.Time, b *budget, withTree bool) walkResult {
	w := &walker{b: b, since: since, seen: map[uint64]bool{}}
	var st unix.Stat_t
	if err := unix.Stat(root, &st); err != nil {
		w.res.Stop = stopFor(err)
		return w.res
	}
	w.dev = uint64(st.Dev)
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		if why := b.spend(); why != "" {
			w.res.Stop = why
			return w.res
		}
		w.res.Entries++
		w.file(&st)
		return w.res
	}
	fd, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		w.res.Stop = stopFor(err)
		return w.res
	}
	var n *node
	if withTree {
		n = &node{name: "/"}
		w.res.tree = n
	}
	w.dir(fd, 1, n)
	return w.res
}

// dir walks the directory open at fd (and closes it), adding its subtree's
// bytes to n and the result; it returns those bytes.
func (w *walker) dir(fd, depth int, n *node) int64 {
	f := os.NewFile(uintptr(fd), "")
	defer f.Close()
	var total int64
	for {
		ents, err := f.ReadDir(256)
		for _, e := range ents {
			if why := w.b.spend(); why != "" {
				w.stop(why)
				return w.add(n, total)
			}
			w.res.Entries++
			var st unix.Stat_t
			if err := unix.Fstatat(fd, e.Name(), &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
				if !errors.Is(err, unix.ENOENT) { // gone meanwhile: not a gap
					w.stop(stopFor(err))
				}
				continue
			}
			if st.Mode&unix.S_IFMT != unix.S_IFDIR {
				total += w.file(&st)
				continue
			}
			if uint64(st.Dev) != w.dev {
				continue // a mount inside the tree is not part of it
			}
			if depth >= maxDepth {
				w.stop(stopError)
				continue
			}
			sub, err := unix.Openat(fd, e.Name(), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			if err != nil {
				if !errors.Is(err, unix.ENOENT) {
					w.stop(stopFor(err))
				}
				continue
			}
			var child *node
			if n != nil && depth < treeDepth {
				child = &node{name: e.Name()}
				if n.children == nil {
					n.children = map[string]*node{}
				}
				n.children[e.Name()] = child
			}
			total += w.dir(sub, depth+1, child)
			if w.res.Stop == stopEntries || w.res.Stop == stopTime {
				return w.add(n, total)
			}
		}
		if errors.Is(err, io.EOF) || (err == nil && len(ents) == 0) {
			break
		}
		if err != nil {
			w.stop(stopFor(err))
			break
		}
	}
	return w.add(n, total)
}

// add records a directory's subtree total in its node.
func (w *walker) add(n *node, total int64) int64 {
	if n != nil {
		n.bytes = total
	}
	return total
}

// file counts a non-directory and returns the bytes it adds.
func (w *walker) file(st *unix.Stat_t) int64 {
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG, unix.S_IFLNK:
	default:
		return 0 // devices (overlay whiteouts), sockets, fifos hold no data
	}
	if st.Nlink > 1 {
		if w.seen[st.Ino] {
			return 0
		}
		w.seen[st.Ino] = true
	}
	w.res.Bytes += st.Size
	if !time.Unix(st.Mtim.Unix()).Before(w.since) {
		w.res.Since += st.Size
	}
	return st.Size
}

// stop records why the walk is incomplete; a cap outranks a gap, since it
// ends the walk.
func (w *walker) stop(why string) {
	switch {
	case w.res.Stop == "":
		w.res.Stop = why
	case why == stopEntries || why == stopTime:
		w.res.Stop = why
	}
}

func stopFor(err error) string {
	if errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM) {
		return stopPermission
	}
	return stopError
}

// dominance is the share of a directory's bytes one child must hold for
// the walk to name the child instead of the directory: a database that
// writes everything under /var/lib/postgresql/data is named by that
// directory, not by /var.
const dominance = 0.8

// topPaths names up to k directories where the tree's bytes are: from the
// root's largest child (the root itself is no place for a volume) it
// descends into any child holding at least 80% of its parent's bytes,
// names the directory where that stops, takes its bytes out of the tree
// and starts again, until k paths are named or what is left is less than
// 5% of the total. The root is named only for files directly in it.
func topPaths(root *node, k int) []api.PathBytes {
	if root == nil || root.bytes <= 0 {
		return nil
	}
	total := root.bytes
	var out []api.PathBytes
	for len(out) < k && root.bytes > 0 && float64(root.bytes) >= 0.05*float64(total) {
		chain := []*node{root}
		n := root
		if c := largestChild(root); c != nil {
			chain = append(chain, c)
			n = c
		}
		for {
			c := largestChild(n)
			if c == nil || float64(c.bytes) < dominance*float64(n.bytes) {
				break
			}
			chain = append(chain, c)
			n = c
		}
		last := chain[len(chain)-1]
		names := make([]string, 0, len(chain))
		for _, n := range chain[1:] {
			names = append(names, n.name)
		}
		taken := last.bytes
		out = append(out, api.PathBytes{Path: "/" + path.Join(names...), Bytes: taken})
		for _, n := range chain {
			n.bytes -= taken
		}
		// The named directory's children are accounted for now.
		last.children = nil
	}
	slices.SortStableFunc(out, func(a, b api.PathBytes) int { return cmp.Compare(b.Bytes, a.Bytes) })
	return out
}

// largestChild is the child with the most bytes (ties by name, so the
// answer does not depend on map order), or nil.
func largestChild(n *node) *node {
	var best *node
	names := make([]string, 0, len(n.children))
	for name := range n.children {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		c := n.children[name]
		if c.bytes > 0 && (best == nil || c.bytes > best.bytes) {
			best = c
		}
	}
	return best
}
