package faults

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/layerprobe/layerprobe/internal/testsupport/testdaemon"
)

func availBytes(t *testing.T, path string) int64 {
	t.Helper()
	var st unix.Statfs_t
	must(t, unix.Statfs(path, &st))
	return int64(st.Bavail) * st.Bsize
}

// filler is a neighbour that fills the data root's file system the moment
// the agent starts laying out a fio job file.
type filler struct {
	path string
	once sync.Once
	done chan struct{}
	stop chan struct{}

	mu     sync.Mutex
	victim []string // command line of the fio layout that was running
	err    error
}

// armFiller polls for the agent's fio layouts (the only fio runs that
// allocate blocks: the measured jobs overwrite the file laid out before
// them, which a full file system does not stop) every millisecond. It
// stops the first one it sees (SIGSTOP), and if its file is not yet
// whole, fills the file system and lets it go on into ENOSPC. A layout
// that had written its whole file before it was seen (a loaded machine's
// scheduler can allow that) is let go, and the next one is the victim:
// so the outcome does not depend on how fast fio starts under load.
func armFiller(t *testing.T, dataRoot string) *filler {
	f := &filler{path: filepath.Join(dataRoot, "neighbour-filler"), done: make(chan struct{}), stop: make(chan struct{})}
	go func() {
		defer close(f.done)
		seen := map[int]bool{}
		for {
			select {
			case <-f.stop:
				return
			default:
			}
			for _, p := range fioJobsRunning(dataRoot) {
				if seen[p.pid] || !isLayout(p.args) {
					continue
				}
				seen[p.pid] = true
				if unix.Kill(p.pid, unix.SIGSTOP) != nil {
					continue // it ended
				}
				if layoutWhole(p) {
					_ = unix.Kill(p.pid, unix.SIGCONT)
					continue
				}
				err := fill(f.path)
				_ = unix.Kill(p.pid, unix.SIGCONT)
				f.mu.Lock()
				f.victim, f.err = p.args, err
				f.mu.Unlock()
				return
			}
			time.Sleep(time.Millisecond)
		}
	}()
	t.Cleanup(func() { f.remove(t) })
	return f
}

// isLayout: fio's layout of a job file (fio.Command with fio.Layout) is
// named after the workload with "-layout".
func isLayout(args []string) bool {
	for _, a := range args {
		if strings.HasPrefix(a, "--name=") && strings.HasSuffix(a, "-layout") {
			return true
		}
	}
	return false
}

// layoutWhole says whether the file a stopped layout writes already has
// its full size: seen through the process's own root, as a fio in the
// probe container sees its directory.
func layoutWhole(p fioProc) bool {
	var dir, name string
	var size int64
	for _, a := range p.args {
		switch {
		case strings.HasPrefix(a, "--directory="):
			dir = strings.ReplaceAll(strings.TrimPrefix(a, "--directory="), `\:`, ":")
		case strings.HasPrefix(a, "--filename="):
			name = strings.TrimPrefix(a, "--filename=")
		case strings.HasPrefix(a, "--size="):
			size, _ = strconv.ParseInt(strings.TrimPrefix(a, "--size="), 10, 64)
		}
	}
	st, err := os.Stat(filepath.Join(fmt.Sprintf("/proc/%d/root", p.pid), dir, name))
	return err == nil && size > 0 && st.Size() >= size
}

// fill allocates all free space of the file system to path.
func fill(path string) error {
	fd, err := unix.Open(path, unix.O_CREAT|unix.O_WRONLY|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	var st unix.Statfs_t
	if err := unix.Fstatfs(fd, &st); err != nil {
		return err
	}
	var off int64
	for chunk := int64(st.Bavail) * st.Bsize; chunk >= 4096; {
		if err := unix.Fallocate(fd, 0, off, chunk); err == nil {
			off += chunk
		} else if errors.Is(err, unix.ENOSPC) {
			chunk /= 2
		} else {
			return err
		}
	}
	return nil
}

func (f *filler) remove(t *testing.T) {
	f.once.Do(func() { close(f.stop) })
	<-f.done
	if err := os.Remove(f.path); err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Errorf("remove the filler: %v", err)
	}
}

// The data root's file system (xfs on a 400 MiB loop file) fills up while a
// cycle runs: another writer takes every free block just as the agent lays
// out a job file. The layout fails with ENOSPC, recorded as no_space for its target,
// the jobs after it are refused by the free-space check before they write
// anything, every file of the cycle is removed, the free space after the
// filler is gone is what it was before the cycle, the agent stays healthy
// and the next cycle succeeds. Then the configured free-space reserve makes
// the agent skip a cycle (low_space) without creating anything.
func TestDataRootFillsUp(t *testing.T) {
	d := testdaemon.Start(t, testdaemon.Options{Driver: "overlay2", Backing: "xfs", SizeMiB: 400})
	docker := newDockerAPI(d.Host)
	s := newAgentSetup(t, d.Host, baseConfig)
	a := s.start(t)
	a.trigger(t, 30*time.Second)
	first := a.newCycle(t, 0, 2*time.Minute)
	if first.Result != "ok" {
		t.Fatalf("first cycle on the small file system: %+v", first)
	}
	before := availBytes(t, d.DataRoot)

	f := armFiller(t, d.DataRoot)
	a.trigger(t, 30*time.Second)
	full := a.newCycle(t, first.ID, 2*time.Minute)
	<-f.done
	if f.err != nil || f.victim == nil {
		t.Fatalf("the filler did not fill the file system: %v", f.err)
	}
	t.Logf("file system filled while fio laid out %s; %d bytes free left",
		strings.Join(f.victim[3:], " "), availBytes(t, d.DataRoot))
	if full.Result != "failed" || full.Reason != "fio_failures" || !strings.Contains(full.Message, "no_space") {
		t.Errorf("cycle on the full file system: %+v; want failed, fio_failures with no_space", full)
	}
	t.Logf("cycle on the full file system: %s/%s: %s", full.Result, full.Reason, full.Message)
	var enospc, refused int
	for _, sm := range a.samples(t, full.ID) {
		if sm.Error == nil {
			continue
		}
		switch {
		case sm.Error.Reason == "no_space" && strings.Contains(strings.ToLower(sm.Error.Message), "no space left on device"):
			enospc++
			t.Logf("ENOSPC recorded: round %d %s/%s: %s", sm.Round, sm.Target, sm.Workload, sm.Error.Message)
		case sm.Error.Reason == "no_space" && strings.Contains(sm.Error.Message, "free-space check refused"):
			refused++
		default:
			t.Errorf("unexpected failure: %s/%s: %s: %s", sm.Target, sm.Workload, sm.Error.Reason, sm.Error.Message)
		}
	}
	t.Logf("%d jobs failed with ENOSPC, %d refused by the free-space check", enospc, refused)
	if enospc == 0 {
		t.Error("no job recorded the ENOSPC fio ran into")
	}
	if f := jobFiles(d.DataRoot); len(f) > 0 {
		t.Errorf("job files left on the full file system: %v", f)
	}

	// xfs frees the blocks of an unlinked file in the background: sync
	// and give it a few seconds.
	f.remove(t)
	after, deadline := availBytes(t, d.DataRoot), time.Now().Add(15*time.Second)
	for (after < before-1<<20 || after > before+1<<20) && time.Now().Before(deadline) {
		if fd, err := unix.Open(d.DataRoot, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0); err == nil {
			_ = unix.Syncfs(fd)
			unix.Close(fd)
		}
		time.Sleep(100 * time.Millisecond)
		after = availBytes(t, d.DataRoot)
	}
	t.Logf("free space: %d MiB before the cycle, %d MiB after it once the filler is gone (difference %d KiB)",
		before>>20, after>>20, (after-before)>>10)
	if diff := after - before; diff < -1<<20 || diff > 1<<20 {
		t.Errorf("free space %d before, %d after: the cycle on the full disk kept %d bytes", before, after, before-after)
	}
	if code, b := a.get(t, "/healthz"); code != 200 {
		t.Errorf("/healthz after the full disk: %d %s", code, b)
	}
	a.trigger(t, 30*time.Second)
	if next := a.newCycle(t, full.ID, 2*time.Minute); next.Result != "ok" {
		t.Errorf("cycle after space came back: %+v, want ok", next)
	}
	checkClean(t, docker, d.DataRoot, 1)
	if code := a.stop(t); code != 0 {
		t.Errorf("SIGTERM: exit %d", code)
	}

	// The configured reserve: 1 GiB must stay free on a 400 MiB file
	// system, so the cycle is skipped before anything is created.
	guarded := newAgentSetup(t, d.Host, strings.Replace(baseConfig, "min_free_bytes: 0", "min_free_bytes: 1GiB", 1))
	a = guarded.start(t)
	a.trigger(t, 30*time.Second)
	skipped := a.newCycle(t, 0, time.Minute)
	if skipped.Result != "skipped" || skipped.Reason != "low_space" || !strings.Contains(skipped.Message, "1024 MiB must stay free") {
		t.Errorf("cycle with a 1 GiB reserve on a 400 MiB file system: %+v; want skipped, low_space", skipped)
	}
	t.Logf("with the reserve configured: %s/%s: %s", skipped.Result, skipped.Reason, skipped.Message)
	checkClean(t, docker, d.DataRoot, 0)
	if code := a.stop(t); code != 0 {
		t.Errorf("SIGTERM: exit %d", code)
	}
}
