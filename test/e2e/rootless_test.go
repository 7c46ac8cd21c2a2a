package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/layerprobe/layerprobe/internal/hostfs"
	"github.com/layerprobe/layerprobe/internal/report"
	"github.com/layerprobe/layerprobe/internal/testsupport/testdaemon"
	"github.com/layerprobe/layerprobe/internal/testsupport/testharness"
)

// rootlessUID runs the rootless engine and layerprobe: nobody, so the test
// adds no user to the machine (Podman then maps that one uid alone).
const rootlessUID = 65534

// TestRootlessPodman runs `layerprobe run` and an agent cycle as a non-root
// user against that user's rootless Podman, after a root layerprobe took
// the host lock: the lock file is shared, the host arm writes into the
// user's data root, the bind mount is the user's own directory, and
// nothing is left behind.
func TestRootlessPodman(t *testing.T) {
	queue.Parallel(t) // its own private engine, and no assertion on the disk's timing
	d := testdaemon.Start(t, testdaemon.Options{Engine: testdaemon.EnginePodman, User: rootlessUID})
	lock := sharedLockFile(t)
	env := append([]string{"PATH=" + os.Getenv("PATH"), "DOCKER_HOST=" + d.Host, "LAYERPROBE_LOCK_FILE=" + lock}, d.Env()...)
	asUser := func(cmd *exec.Cmd) *exec.Cmd {
		cmd.Env = env
		cmd.Dir = d.Dir
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: rootlessUID, Gid: rootlessUID}}
		return cmd
	}

	t.Run("run", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		cmd := asUser(exec.CommandContext(ctx, binary, "run", "--output", "json", "--rounds", "6", "--log.level", "warn"))
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("layerprobe run as uid %d: %v\nstderr:\n%s", rootlessUID, err, stderr.String())
		}
		var run report.Run
		if err := json.Unmarshal(out, &run); err != nil {
			t.Fatalf("decode output: %v\n%s", err, out)
		}
		checkRun(t, run, "overlay", "extfs", hostFioVersion(t))
		if e := run.Engines[0]; !e.Rootless || e.Runtime != "podman" || e.DataRoot != d.DataRoot {
			t.Errorf("engine: rootless %v, runtime %q, data root %q; want a rootless podman at %s", e.Rootless, e.Runtime, e.DataRoot, d.DataRoot)
		}
		checkNothingLeft(t, d)
	})

	t.Run("agent cycle", func(t *testing.T) {
		// fsync alone: the run above measured every job on every target;
		// the cycle must run, label the engine and leave nothing behind.
		files, err := testharness.WriteAgentFiles(filepath.Join(d.Dir, "agent"), agentConfig+"\nworkloads: [fsync]", "rootless-token-0123456789")
		if err != nil {
			t.Fatal(err)
		}
		chownTree(t, files.Dir, rootlessUID)
		addr := fmt.Sprintf("127.0.0.1:%d", testharness.MustFreePort(t))
		p, err := testharness.Start(asUser(exec.Command(binary, files.Args(addr, "--log.level", "debug")...)))
		if err != nil {
			t.Fatal(err)
		}
		a := &agentProc{Proc: p, t: t, base: "http://" + addr}
		t.Cleanup(func() {
			a.Kill()
			if t.Failed() {
				t.Logf("agent log:\n%s", testharness.Tail(a.Log.String(), 60))
			}
		})
		if err := testharness.WaitHTTP(context.Background(), a.base+"/healthz", 30*time.Second, a.Done()); err != nil {
			t.Fatalf("agent at start: %v\n%s", err, a.Log.String())
		}
		a.waitCycles(t, "ok", 1, 5*time.Minute)
		_, series := a.scrape(t)
		if v, ok := series.Find("layerprobe_engine_info", map[string]string{"runtime": "podman", "driver": "overlay", "data_root": d.DataRoot}); !ok || v != 1 {
			t.Errorf("layerprobe_engine_info for the rootless Podman: %v (present %v); series %v", v, ok, series["layerprobe_engine_info"])
		}
		if code, _ := a.stop(); code != 0 {
			t.Errorf("agent exited %d", code)
		}
		if l := newAPI(d.Host).labelled(t); len(l.Containers)+len(l.Volumes) != 0 {
			t.Errorf("left behind after the agent stopped: %+v", l)
		}
		checkNoScratchFiles(t, d.DataRoot)
	})
}

// sharedLockFile is a host lock file in a directory like /run/lock (sticky,
// world-writable), created by a root layerprobe that held it and let go.
func sharedLockFile(t *testing.T) string {
	t.Helper()
	top, err := os.MkdirTemp("", "lpsharedlock")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(top) })
	dir := filepath.Join(top, "lock")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for p, mode := range map[string]os.FileMode{top: 0o755, dir: 0o777 | os.ModeSticky} {
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(dir, "layerprobe.lock")
	l, err := hostfs.TryLock(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Unlock(); err != nil {
		t.Fatal(err)
	}
	return path
}

func chownTree(t *testing.T, dir string, uid int) {
	t.Helper()
	err := filepath.WalkDir(dir, func(p string, _ os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, uid)
	})
	if err != nil {
		t.Fatal(err)
	}
}
