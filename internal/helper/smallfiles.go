package helper

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/layerprobe/layerprobe/internal/smallfiles"
)

// smallFiles runs one execution of the small-file workload in a directory
// and prints its figures as fio's JSON (smallfiles.FioJSON), so that one
// parser reads fio's jobs and this one. The arguments are fio-style
// (--name=, --directory=) because the agent builds them as it builds a fio
// command. A failed execution prints the job with its errno and exits
// non-zero, as fio does.
func smallFiles(w io.Writer, args []string) error {
	var name, dir string
	var spec smallfiles.Spec
	for _, a := range args {
		k, v, ok := strings.Cut(a, "=")
		if !ok {
			return fmt.Errorf("smallfiles: argument %q: want --name=, --directory=, --files= or --max-bytes=", a)
		}
		var err error
		switch k {
		case "--name":
			name = v
		case "--directory":
			dir = v
		case "--files":
			spec.Files, err = strconv.Atoi(v)
		case "--max-bytes":
			spec.MaxBytes, err = strconv.ParseInt(v, 10, 64)
		default:
			return fmt.Errorf("smallfiles: unknown argument %q: want --name=, --directory=, --files= or --max-bytes=", k)
		}
		if err != nil {
			return fmt.Errorf("smallfiles: %s: %w", k, err)
		}
	}
	if dir == "" || !filepath.IsAbs(dir) || filepath.Clean(dir) != dir {
		return fmt.Errorf("smallfiles: --directory %q: want an absolute, clean path", dir)
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return fmt.Errorf("smallfiles: --directory %s: not a directory (%v)", dir, err)
	}
	res, runErr := smallfiles.Run(dir, spec)
	if runErr != nil && res.Ops == 0 && res.Files == 0 {
		return runErr // bad spec: nothing ran
	}
	if _, err := w.Write(smallfiles.FioJSON(name, res, runErr)); err != nil {
		return errors.Join(runErr, fmt.Errorf("smallfiles: %w", err))
	}
	return runErr
}
