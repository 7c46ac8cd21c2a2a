package containerd

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"syscall"

	"github.com/containerd/fifo"
)

// execIO is the output of one exec: two FIFOs the shim writes into, each
// copied into its writer until the shim closes it.
type execIO struct {
	stdout, stderr string // the FIFOs' paths, for the exec request
	dir            string
	cancel         context.CancelFunc
	files          []io.Closer
	copies         sync.WaitGroup
}

// newExecIO makes the exec's FIFOs in a directory of their own under root
// and starts copying them. The read side is opened first (non-blocking),
// so the shim's open for writing completes at once.
func newExecIO(_ context.Context, root, execID string, stdout, stderr io.Writer) (*execIO, error) {
	if err := os.MkdirAll(root, 0o700); err != nil {
		return nil, fmt.Errorf("make the exec's FIFO directory: %w", err)
	}
	dir, err := os.MkdirTemp(root, "")
	if err != nil {
		return nil, fmt.Errorf("make the exec's FIFO directory: %w", err)
	}
	// The copies outlive a cancelled exec until close: its output is read
	// until the process is gone.
	ctx, cancel := context.WithCancel(context.Background())
	e := &execIO{stdout: filepath.Join(dir, execID+"-stdout"), stderr: filepath.Join(dir, execID+"-stderr"), dir: dir, cancel: cancel}
	for _, s := range []struct {
		path string
		w    io.Writer
	}{{e.stdout, stdout}, {e.stderr, stderr}} {
		f, err := fifo.OpenFifo(ctx, s.path, syscall.O_RDONLY|syscall.O_CREAT|syscall.O_NONBLOCK, 0o700)
		if err != nil {
			e.close()
			return nil, fmt.Errorf("open the exec's output FIFO: %w", err)
		}
		e.files = append(e.files, f)
		e.copies.Add(1)
		go func() {
			defer e.copies.Done()
			_, _ = io.Copy(s.w, f)
		}()
	}
	return e, nil
}

// wait returns once the shim has closed both FIFOs and what they held is
// copied.
func (e *execIO) wait() { e.copies.Wait() }

// close stops the copies and removes the FIFOs.
func (e *execIO) close() {
	e.cancel()
	for _, f := range e.files {
		_ = f.Close()
	}
	_ = os.RemoveAll(e.dir)
}
