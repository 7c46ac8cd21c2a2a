package hostfs

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestSameFilesystem(t *testing.T) {
	dir := t.TempDir()
	a := filepath.Join(dir, "a")
	b := filepath.Join(dir, "b")
	for _, d := range []string{a, b} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	same, err := SameFilesystem(a, b)
	if err != nil || !same {
		t.Fatalf("SameFilesystem(two dirs in one temp dir) = %v, %v; want true", same, err)
	}
	// /proc is another file system everywhere.
	same, err = SameFilesystem(a, "/proc")
	if err != nil || same {
		t.Fatalf("SameFilesystem(%s, /proc) = %v, %v; want false", a, same, err)
	}
	if _, err := SameFilesystem(filepath.Join(dir, "missing"), a); err == nil {
		t.Fatal("SameFilesystem on a missing path: want an error")
	}
}

func TestFreeSpace(t *testing.T) {
	sp, err := FreeSpace(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if sp.Total == 0 || sp.Avail > sp.Total {
		t.Fatalf("FreeSpace = %+v; want 0 < avail <= total", sp)
	}
}

func TestOwnerRoundTripAndAlive(t *testing.T) {
	me, err := Self()
	if err != nil {
		t.Fatal(err)
	}
	tok := me.String()
	got, err := ParseOwner(tok)
	if err != nil || got != me {
		t.Fatalf("ParseOwner(%q) = %+v, %v; want %+v", tok, got, err, me)
	}
	if !Alive(tok) {
		t.Fatalf("Alive(self %q) = false", tok)
	}
	// A recycled pid: same pid, another start time.
	if Alive(Owner{Boot: me.Boot, PID: me.PID, StartTime: me.StartTime + 1}.String()) {
		t.Fatal("Alive with a wrong start time = true")
	}
	// An earlier boot.
	if Alive(Owner{Boot: "000000000000", PID: me.PID, StartTime: me.StartTime}.String()) {
		t.Fatal("Alive with another boot id = true")
	}
	// A process that exited.
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Skip("no true(1):", err)
	}
	if Alive(Owner{Boot: me.Boot, PID: cmd.Process.Pid, StartTime: 1}.String()) {
		t.Fatal("Alive(exited process) = true")
	}
	for _, bad := range []string{"", "lp-", "lp-abc-x-1", "foo-abc-1-2", "lp-abc-1", "lp-abc-0-5"} {
		if _, err := ParseOwner(bad); err == nil {
			t.Errorf("ParseOwner(%q): want an error", bad)
		}
		if Alive(bad) {
			t.Errorf("Alive(%q) = true", bad)
		}
	}
}

func TestSweepScratchRemovesOnlyDeadOwners(t *testing.T) {
	scratch := t.TempDir()
	me, _ := Self()
	live := me.String()
	dead := Owner{Boot: me.Boot, PID: me.PID, StartTime: me.StartTime + 7}.String()
	foreign := "not-ours"
	for _, d := range []string{live, dead, foreign} {
		if err := os.MkdirAll(filepath.Join(scratch, d, "sub"), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	removed, err := SweepScratch(scratch, Alive)
	if err != nil {
		t.Fatal(err)
	}
	if len(removed) != 1 || filepath.Base(removed[0]) != dead {
		t.Fatalf("removed %v; want only %s", removed, dead)
	}
	for _, d := range []string{live, foreign} {
		if _, err := os.Stat(filepath.Join(scratch, d)); err != nil {
			t.Errorf("%s was removed: %v", d, err)
		}
	}
	// alive == nil removes every owner directory, still not foreign ones.
	if _, err := SweepScratch(scratch, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(scratch, live)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("live dir survived a forced sweep: %v", err)
	}
	if _, err := os.Stat(filepath.Join(scratch, foreign)); err != nil {
		t.Errorf("foreign dir removed: %v", err)
	}
	// A missing scratch directory is nothing to sweep.
	if r, err := SweepScratch(filepath.Join(scratch, "nope"), nil); err != nil || len(r) != 0 {
		t.Fatalf("SweepScratch(missing) = %v, %v", r, err)
	}
}

func TestClearDir(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"a", "b/c"} {
		p := filepath.Join(dir, f)
		_ = os.MkdirAll(filepath.Dir(p), 0o700)
		if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := ClearDir(dir); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 0 {
		t.Fatalf("ClearDir left %d entries", len(entries))
	}
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("ClearDir removed the directory itself: %v", err)
	}
}

func TestTryLockExcludes(t *testing.T) {
	p := filepath.Join(t.TempDir(), "x.lock")
	l, err := TryLock(p)
	if err != nil {
		t.Fatal(err)
	}
	// flock is per open file description: a second TryLock in the same
	// process conflicts, like another process would.
	_, err = TryLock(p)
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("second TryLock = %v; want ErrLocked", err)
	}
	var held *LockedError
	if want := "held by pid " + strconv.Itoa(os.Getpid()); !errors.As(err, &held) || held.Holder != want || held.Path != p {
		t.Errorf("second TryLock = %#v; want a LockedError naming %s and %q", err, p, want)
	}
	b, _ := os.ReadFile(p)
	if want := strconv.Itoa(os.Getpid()) + "\n"; string(b) != want {
		t.Errorf("lock file holds %q; want %q", b, want)
	}
	if err := l.Unlock(); err != nil {
		t.Fatal(err)
	}
	l2, err := TryLock(p)
	if err != nil {
		t.Fatalf("TryLock after Unlock: %v", err)
	}
	_ = l2.Unlock()
}

func TestReflinkAnswersOnTheTestFileSystem(t *testing.T) {
	dir := t.TempDir()
	ok, err := Reflink(dir)
	if err != nil {
		t.Fatalf("Reflink(%s): %v", dir, err)
	}
	t.Logf("reflink on %s: %v", dir, ok)
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 0 {
		t.Errorf("Reflink left %d files behind", len(entries))
	}
	if _, err := Reflink(filepath.Join(dir, "missing")); err == nil {
		t.Error("Reflink in a missing directory: no error")
	}
}

func TestMountOf(t *testing.T) {
	dir := t.TempDir()
	m, err := MountOf(dir)
	if err != nil {
		t.Fatal(err)
	}
	if m.Mountpoint != "/" && !strings.HasPrefix(dir+"/", m.Mountpoint+"/") {
		t.Errorf("MountOf(%s) = mount point %s, not above it", dir, m.Mountpoint)
	}
	if m.FSType == "" || m.Source == "" {
		t.Errorf("MountOf(%s) = %+v, want a file system type and a source", dir, m)
	}
	if _, err := MountOf(filepath.Join(dir, "missing")); err == nil {
		t.Error("MountOf of a missing path: no error")
	}
}
