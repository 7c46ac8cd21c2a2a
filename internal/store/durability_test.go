package store

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/layerprobe/layerprobe/internal/testsupport/testharness"
)

// childEnv makes the test binary act as an agent process that the
// SIGKILL test kills: its value is the state directory.
const childEnv = "LAYERPROBE_STORE_TEST_CHILD_DIR"

func TestMain(m *testing.M) {
	if dir := os.Getenv(childEnv); dir != "" {
		os.Exit(runChild(dir))
	}
	os.Exit(m.Run())
}

// runChild plays an agent: it finishes three cycles, starts a fourth and
// leaves it running, then keeps finishing cycles of another engine until it
// is killed. It prints "done ID" after each commit and "running ID" once
// the fourth has started, so the parent knows what must have survived.
func runChild(dir string) int {
	ctx := context.Background()
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 2
	}
	s, err := Open(dir, slog.New(slog.NewTextHandler(os.Stderr, nil)))
	if err != nil {
		return fail(err)
	}
	finish := func(engine string, start time.Time, round int) error {
		c := &Cycle{Engine: engine, Mode: "steady", Trigger: "schedule", StartedAt: start}
		if err := s.StartCycle(ctx, c); err != nil {
			return err
		}
		c.FirstRound, c.Rounds, c.Result = round, 1, ResultOK
		c.Samples = roundSamples(round, start)
		for _, sm := range c.Samples {
			c.BytesWritten += sm.BytesWritten
		}
		if err := s.FinishCycle(ctx, c); err != nil {
			return err
		}
		fmt.Printf("done %d\n", c.ID)
		return nil
	}
	for i := range 3 {
		if err := finish("e", t0.Add(time.Duration(i)*time.Hour), i+1); err != nil {
			return fail(err)
		}
	}
	running := &Cycle{Engine: "e", Mode: "steady", Trigger: "schedule", StartedAt: t0.Add(3 * time.Hour)}
	if err := s.StartCycle(ctx, running); err != nil {
		return fail(err)
	}
	if err := s.SaveDetectorState(ctx, "e", "steady", "container", []byte(`{"round":3}`)); err != nil {
		return fail(err)
	}
	fmt.Printf("running %d\n", running.ID)
	// Bounded, so that a parent that failed to kill cannot leave it
	// running for ever.
	for i := range 100000 {
		if err := finish("busy", t0.Add(time.Duration(i)*time.Second), i+1); err != nil {
			return fail(err)
		}
	}
	return 3
}

func TestSIGKILLDurability(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+dir)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var waitOnce sync.Once
	var waitErr error
	wait := func() error {
		waitOnce.Do(func() { waitErr = cmd.Wait() })
		return waitErr
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = wait()
	})

	// Kill the child once it has left a cycle running and committed a few
	// more while the kill may land in the middle of a transaction.
	var done []int64
	var running int64
	doneAfterRunning := 0
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 2 {
			continue
		}
		id, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			continue
		}
		switch f[0] {
		case "done":
			done = append(done, id)
			if running != 0 {
				doneAfterRunning++
			}
		case "running":
			running = id
		}
		if running != 0 && doneAfterRunning >= 20 {
			if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatalf("kill child: %v", err)
			}
			break
		}
	}
	err = wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || !ee.Sys().(syscall.WaitStatus).Signaled() || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("child did not die by SIGKILL: %v\nstderr:\n%s", err, stderr.String())
	}
	if running == 0 || len(done) < 23 {
		t.Fatalf("child reported running %d, %d done cycles", running, len(done))
	}

	// The kernel dropped the dead agent's lock: the next one opens.
	ctx := context.Background()
	s := openStore(t, dir)
	for _, id := range done {
		c, err := s.Cycle(ctx, id)
		if err != nil {
			t.Errorf("committed cycle %d lost: %v", id, err)
			continue
		}
		if c.Result != ResultOK || len(c.Samples) != perRound || c.BytesWritten == 0 {
			t.Errorf("committed cycle %d: result %s, %d samples, %d bytes", id, c.Result, len(c.Samples), c.BytesWritten)
		}
	}
	c, err := s.Cycle(ctx, running)
	if err != nil {
		t.Fatalf("running cycle %d: %v", running, err)
	}
	if c.Result != ResultInterrupted || c.Reason != "interrupted" || c.Message != "agent stopped during the cycle" || len(c.Samples) != 0 {
		t.Errorf("killed cycle after reopen: %+v", c)
	}
	if st, err := s.DetectorState(ctx, "e", "steady", "container"); err != nil || string(st) != `{"round":3}` {
		t.Errorf("detector state after kill: %s, %v", st, err)
	}
	// Whatever transaction the kill cut short left nothing half-written:
	// every ok cycle has all its samples, and nothing is still running.
	var partial int
	if err := s.db.QueryRow(`SELECT COUNT(*) FROM cycles c WHERE c.result = 'ok'
		AND (SELECT COUNT(*) FROM samples s WHERE s.cycle_id = c.id) != ?`, perRound).Scan(&partial); err != nil || partial != 0 {
		t.Errorf("%d ok cycles without all their samples (%v)", partial, err)
	}
	if counts, err := s.Counts(ctx, ""); err != nil || counts[ResultRunning] != 0 || counts[ResultInterrupted] < 1 {
		t.Errorf("counts after recovery: %v, %v", counts, err)
	}
	if n, err := s.NextRound(ctx, "e", "steady"); err != nil || n != 4 {
		t.Errorf("NextRound(e) after kill = %d, %v; want 4", n, err)
	}
}

func TestOpenCorruptDatabase(t *testing.T) {
	t.Run("not a database", func(t *testing.T) {
		dir := t.TempDir()
		garbage := bytes.Repeat([]byte("layerprobe is not a database. "), 300)
		path := filepath.Join(dir, DBFile)
		if err := os.WriteFile(path, garbage, 0o600); err != nil {
			t.Fatal(err)
		}
		expectCorrupt(t, dir, garbage)
	})
	t.Run("damaged page", func(t *testing.T) {
		dir := t.TempDir()
		s := openStore(t, dir)
		for i := range 20 {
			finished(t, s, "e", t0.Add(time.Duration(i)*time.Hour), 2*i+1, 2, "ok")
		}
		var pageSize, root int64
		if err := s.db.QueryRow(`PRAGMA page_size`).Scan(&pageSize); err != nil {
			t.Fatal(err)
		}
		if err := s.db.QueryRow(`SELECT rootpage FROM sqlite_master WHERE name = 'samples'`).Scan(&root); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, DBFile)
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if int64(len(b)) < root*pageSize {
			t.Fatalf("database of %d bytes has no page %d", len(b), root)
		}
		// Scribble over the samples table's root page, keeping page 1
		// (the header and schema) intact.
		copy(b[(root-1)*pageSize:root*pageSize], bytes.Repeat([]byte{0xa5}, int(pageSize)))
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		expectCorrupt(t, dir, b)
	})
}

// expectCorrupt opens dir, expects ErrCorrupt, and checks the file is
// still there, byte for byte, and the lock was released.
func expectCorrupt(t *testing.T, dir string, content []byte) {
	t.Helper()
	s, err := Open(dir, testharness.Logger(t))
	if err == nil {
		s.Close()
		t.Fatal("Open of a corrupt database succeeded")
	}
	t.Logf("Open: %v", err)
	if !errors.Is(err, ErrCorrupt) {
		t.Errorf("Open: %v, want ErrCorrupt", err)
	}
	path := filepath.Join(dir, DBFile)
	if !strings.Contains(err.Error(), path) {
		t.Errorf("error %q does not name %s", err, path)
	}
	after, rerr := os.ReadFile(path)
	if rerr != nil || !bytes.Equal(after, content) {
		t.Errorf("the corrupt file was removed or changed (%v)", rerr)
	}
	l, lerr := lockDir(dir)
	if lerr != nil {
		t.Errorf("lock still held after the failed Open: %v", lerr)
	} else {
		_ = l.Unlock()
	}
}
