package hostfs

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/moby/sys/mountinfo"

	"github.com/layerprobe/layerprobe/internal/testsupport/testharness"
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

// TestLockedAlwaysNamesTheHolder: while one descriptor takes and releases
// the lock in a loop, every refusal another sees names a pid. Before, the
// holder emptied the file before writing its pid, and a refusal in that
// moment said "holder pid unknown".
func TestLockedAlwaysNamesTheHolder(t *testing.T) {
	p := filepath.Join(t.TempDir(), "x.lock")
	stop := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		for {
			select {
			case <-stop:
				done <- nil
				return
			default:
			}
			l, err := TryLock(p)
			if errors.Is(err, ErrLocked) {
				continue
			}
			if err != nil {
				done <- err
				return
			}
			_ = l.Unlock()
		}
	}()
	refused := 0
	for i := 0; i < 20000 && refused < 2000; i++ {
		l, err := TryLock(p)
		var le *LockedError
		switch {
		case errors.As(err, &le):
			refused++
			if want := "held by pid " + strconv.Itoa(os.Getpid()); le.Holder != want {
				t.Fatalf("refusal %d: holder %q, want %q", refused, le.Holder, want)
			}
		case err != nil:
			t.Fatal(err)
		default:
			_ = l.Unlock()
		}
	}
	close(stop)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if refused == 0 {
		t.Skip("the two descriptors never met at the lock")
	}
	t.Logf("%d refusals, each naming the holder", refused)
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

// TestLockSharedAcrossUsers: root takes and releases the host lock, then a
// non-root process (this test binary as nobody, the way a rootless agent
// runs) takes it in the same sticky, world-writable directory, and root
// can take it again after that. Before, the file was created 0644 and the
// non-root agent could not open it.
func TestLockSharedAcrossUsers(t *testing.T) {
	if os.Getenv(lockHelperEnv) != "" {
		return // the helper's work is in TestMain's branch below
	}
	if os.Geteuid() != 0 {
		testharness.SkipOrFail(t, "switching to another user needs root")
	}
	// Like /run/lock: sticky and world-writable, in a directory nobody
	// can traverse.
	top, err := os.MkdirTemp("", "lplock")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(top) })
	lockDir := filepath.Join(top, "lock")
	for _, d := range []struct {
		path string
		mode os.FileMode
	}{{top, 0o755}, {lockDir, 0o777 | os.ModeSticky}} {
		if err := os.MkdirAll(d.path, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(d.path, d.mode); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(lockDir, "layerprobe.lock")
	l, err := TryLock(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o666 {
		t.Errorf("lock file mode = %v (%v), want 0666 whatever the umask", fi.Mode().Perm(), err)
	}
	if err := l.Unlock(); err != nil {
		t.Fatal(err)
	}

	// The test binary, where nobody can run it.
	self, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(top, "hostfs.test")
	if err := os.WriteFile(bin, self, 0o755); err != nil {
		t.Fatal(err)
	}
	asNobody := func(holdWhile string) ([]byte, error) {
		cmd := exec.Command(bin, "-test.run=^TestLockSharedAcrossUsers$")
		cmd.Env = []string{lockHelperEnv + "=" + path, "PATH=/usr/bin:/bin", lockHelperHoldEnv + "=" + holdWhile}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		return cmd.CombinedOutput()
	}
	if out, err := asNobody(""); err != nil {
		t.Fatalf("a non-root process could not take the lock after root: %v\n%s", err, out)
	}
	// While nobody holds it, root is refused, and told by which pid.
	held := filepath.Join(top, "held")
	if err := os.WriteFile(held, nil, 0o666); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		out, err := asNobody(held)
		if err != nil {
			err = fmt.Errorf("%w: %s", err, out)
		}
		done <- err
	}()
	deadline := time.Now().Add(30 * time.Second)
	for {
		l, err := TryLock(path)
		if errors.Is(err, ErrLocked) {
			var le *LockedError
			if !errors.As(err, &le) || !strings.HasPrefix(le.Holder, "held by pid ") {
				t.Errorf("TryLock while nobody holds it = %v; want the holder's pid", err)
			}
			break
		}
		if err == nil {
			_ = l.Unlock() // the helper has not taken it yet
		}
		if time.Now().After(deadline) {
			t.Fatalf("the non-root process did not take the lock: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	os.Remove(held) // releases the helper
	if err := <-done; err != nil {
		t.Fatalf("non-root holder: %v", err)
	}
	l, err = TryLock(path)
	if err != nil {
		t.Fatalf("root after the non-root process: %v", err)
	}
	_ = l.Unlock()
}

const (
	lockHelperEnv     = "LAYERPROBE_TEST_LOCK_AS_OTHER_USER"
	lockHelperHoldEnv = "LAYERPROBE_TEST_LOCK_HOLD_WHILE"
)

// TestMain runs the lock helper when the lock test starts this binary as
// another user: take the lock, hold it while a file exists, exit 0.
func TestMain(m *testing.M) {
	path := os.Getenv(lockHelperEnv)
	if path == "" {
		os.Exit(m.Run())
	}
	// The test polls the lock too until this process holds it.
	l, err := TryLock(path)
	for deadline := time.Now().Add(30 * time.Second); errors.Is(err, ErrLocked) && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
		l, err = TryLock(path)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if hold := os.Getenv(lockHelperHoldEnv); hold != "" {
		for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			if _, err := os.Stat(hold); err != nil {
				break
			}
		}
	}
	if err := l.Unlock(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(0)
}

// TestSameStorageZFS decides on mounts as /proc/self/mountinfo shows them
// on a zfs host. This machine has no zfs: the entries are reconstructed
// from moby's zfs driver (daemon/graphdriver/zfs/zfs.go): the parent
// dataset is the one mounted on the data root (lookupZfsDataset), and
// every layer is a dataset <parent>/<id> (zfsPath) mounted with type zfs
// at <data root>/zfs/graph/<id> (mountPath, Get). Each has its own st_dev,
// so SameFilesystem reaches sameStorage for them.
func TestSameStorageZFS(t *testing.T) {
	const id = "3f2a9c0d5e6b7a8f9c0d1e2f3a4b5c6d7e8f9a0b1c2d3e4f5a6b7c8d9e0f1a2b"
	dataRoot := &mountinfo.Info{Mountpoint: "/var/lib/docker", FSType: "zfs", Source: "rpool/var/lib/docker"}
	layer := &mountinfo.Info{Mountpoint: "/var/lib/docker/zfs/graph/" + id, FSType: "zfs", Source: "rpool/var/lib/docker/" + id}
	home := &mountinfo.Info{Mountpoint: "/home", FSType: "zfs", Source: "rpool/home"}
	otherPool := &mountinfo.Info{Mountpoint: "/srv", FSType: "zfs", Source: "tank/srv"}
	ext4 := &mountinfo.Info{Mountpoint: "/", FSType: "ext4", Source: "/dev/vda1"}
	ext4Other := &mountinfo.Info{Mountpoint: "/data", FSType: "ext4", Source: "/dev/vdb1"}
	subvolA := &mountinfo.Info{Mountpoint: "/var/lib/docker", FSType: "btrfs", Source: "/dev/vdc"}
	subvolB := &mountinfo.Info{Mountpoint: "/var/lib/docker/btrfs/subvolumes/x", FSType: "btrfs", Source: "/dev/vdc"}
	for _, tc := range []struct {
		name string
		a, b *mountinfo.Info
		want bool
	}{
		{"layer dataset and data root", layer, dataRoot, true},
		{"another dataset of the pool", home, dataRoot, true},
		{"a dataset of another pool", otherPool, dataRoot, false},
		{"zfs and ext4", dataRoot, ext4, false},
		{"two ext4 disks", ext4, ext4Other, false},
		{"btrfs subvolumes of one device", subvolB, subvolA, true},
	} {
		if got := sameStorage(tc.a, tc.b); got != tc.want {
			t.Errorf("%s: sameStorage(%s, %s) = %v, want %v", tc.name, tc.a.Source, tc.b.Source, got, tc.want)
		}
	}
	for _, tc := range []struct {
		m    *mountinfo.Info
		pool string
		want bool
	}{
		{layer, "rpool", true}, {home, "rpool", true}, {otherPool, "rpool", false},
		{ext4, "rpool", false}, {layer, "", false},
		// A pool named like a dataset's first path element elsewhere.
		{&mountinfo.Info{FSType: "zfs", Source: "rpool2/docker"}, "rpool", false},
	} {
		if got := mountInZpool(tc.m, tc.pool); got != tc.want {
			t.Errorf("mountInZpool(%s %s, %q) = %v, want %v", tc.m.FSType, tc.m.Source, tc.pool, got, tc.want)
		}
	}
	if ok, err := InZpool(t.TempDir(), "rpool"); err != nil || ok {
		t.Errorf("InZpool(a temp dir on this zfs-less machine) = %v, %v; want false", ok, err)
	}
}
