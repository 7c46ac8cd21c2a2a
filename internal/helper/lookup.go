package helper

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// TreeRoot is the only tree the lookup verb may walk and create files in:
// the cold image's tree of small files.
const TreeRoot = "/lp/tree"

// NewFileName is the file FirstCreate creates in a directory.
const NewFileName = ".lp-first-create"

// Walk times a stat walk of the tree under root: every directory read and
// every entry lstat'ed, as `find` or a package manager's resolution does.
// On overlay2 a fresh container's first walk looks every name up through
// the image's layers; on the host, in the directory it lies in.
func Walk(root string) (time.Duration, int, error) {
	start := time.Now()
	n := 0
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if _, err := os.Lstat(p); err != nil {
			return err
		}
		n++
		return nil
	})
	if err != nil {
		return 0, n, fmt.Errorf("walk %s: %w", root, err)
	}
	return time.Since(start), n, nil
}

// FirstCreate times the creation of a new, empty file in dir (open with
// O_CREAT|O_EXCL, close). On overlay2, when dir lives in a lower layer,
// the create first copies the directory and each of its ancestors up
// into the writable layer (a directory's copy-up); on the host it is one
// create. The file is removed again; its removal is not timed.
func FirstCreate(dir string) (time.Duration, error) {
	p := filepath.Join(dir, NewFileName)
	start := time.Now()
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return 0, fmt.Errorf("first create: %w", err)
	}
	if err := f.Close(); err != nil {
		return 0, fmt.Errorf("first create: close %s: %w", p, err)
	}
	d := time.Since(start)
	if err := os.Remove(p); err != nil {
		return 0, fmt.Errorf("first create: remove %s: %w", p, err)
	}
	return d, nil
}

// LookupResult is the lookup verb's JSON output.
type LookupResult struct {
	WalkSeconds float64        `json:"walk_seconds"`
	Entries     int            `json:"entries"`
	Creates     []LookupCreate `json:"creates"`
	Error       string         `json:"error,omitempty"`
}

// LookupCreate is one timed FirstCreate.
type LookupCreate struct {
	Dir     string  `json:"dir"`
	Seconds float64 `json:"seconds"`
	Error   string  `json:"error,omitempty"`
}

// lookup walks TreeRoot, then times a first create in each directory
// given (in the order given; the caller randomises it), and prints one
// JSON document. The walk comes first: a create's copy-up would otherwise
// have warmed the lookups of its directory's ancestors.
func lookup(w io.Writer, dirs []string) error {
	var res LookupResult
	d, n, err := Walk(TreeRoot)
	res.WalkSeconds, res.Entries = d.Seconds(), n
	if err != nil {
		res.Error = err.Error()
	}
	for _, dir := range dirs {
		c := LookupCreate{Dir: dir}
		if cl := filepath.Clean(dir); cl != dir || (cl != TreeRoot && !strings.HasPrefix(cl, TreeRoot+"/")) {
			c.Error = "only directories under " + TreeRoot
		} else if d, err := FirstCreate(dir); err != nil {
			c.Error = err.Error()
		} else {
			c.Seconds = d.Seconds()
		}
		res.Creates = append(res.Creates, c)
	}
	if err := json.NewEncoder(w).Encode(res); err != nil {
		return fmt.Errorf("lookup: %w", err)
	}
	if res.Error != "" {
		return errors.New(res.Error)
	}
	return nil
}
