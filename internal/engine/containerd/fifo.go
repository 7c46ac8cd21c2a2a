package containerd

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/containerd/fifo"
)

// fifoRoot holds the output FIFOs of layerprobe's execs, one directory per
// probe container, under containerd's default FIFO directory: the shim
// opens them by path on the host, so they live where a containerized
// agent already mounts containerd's FIFOs.
var fifoRoot = filepath.Join("/run/containerd/fifo", "layerprobe")

// probeFIFODir is where the output FIFOs of the execs in probe container
// id are made. One directory per probe lets the removal of a probe find
// them when the process that made them is gone.
func probeFIFODir(id string) string { return filepath.Join(fifoRoot, id) }

// readOrphanOutput opens for reading every output FIFO left in a probe's
// FIFO directory, and drains them until the returned function is called.
//
// Why: when layerprobe is killed while an exec starts, the exec's FIFOs
// lose their reader. The shim, starting the exec, then waits in open(2)
// for a reader of the FIFO, for up to 30 seconds, and meanwhile holds the
// exec's pid lock, which its exit handling needs: the probe's task keeps
// reporting "running" after it is killed, and its delete is refused.
// Opening the read side completes the shim's open at once. The FIFOs of
// an exec the shim has already connected are read (and discarded) too;
// the probe is being removed, so nobody else wants its output.
func readOrphanOutput(ctx context.Context, id string) (release func()) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	var files []io.Closer
	_ = filepath.WalkDir(probeFIFODir(id), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.Type()&fs.ModeNamedPipe == 0 {
			return nil // a directory, or gone meanwhile
		}
		// O_NONBLOCK: fifo completes the open in the background, so a
		// FIFO nobody writes to does not hold up the removal.
		f, err := fifo.OpenFifo(ctx, path, syscall.O_RDONLY|syscall.O_NONBLOCK, 0)
		if err != nil {
			return nil
		}
		files = append(files, f)
		go func() { _, _ = io.Copy(io.Discard, f) }()
		return nil
	})
	return func() {
		for _, f := range files {
			_ = f.Close()
		}
		cancel()
	}
}

// removeProbeFIFODir removes a removed probe's FIFO directory. The FIFOs
// of its execs are gone with the execs; what is left is the directory, or
// the FIFOs of a layerprobe killed meanwhile.
func removeProbeFIFODir(id string) error {
	err := os.RemoveAll(probeFIFODir(id))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}
