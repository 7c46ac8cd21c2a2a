package testharness

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// DebianPackages are what the Debian systems of the tests get from
// debootstrap besides its minimal base: the union of what the as-shipped
// box of test/ops (systemd as init, Debian's Docker engine, fio) and the
// VM guest of test/vm (also udev, the kernel, iproute2 and sshd) need, so
// that one debootstrap serves both.
const DebianPackages = "systemd-sysv,dbus,udev,kmod,iproute2,linux-image-amd64,docker.io,fio,ca-certificates,openssh-server"

// DebianRoot returns a Debian 12 root file system made by debootstrap
// (--variant=minbase, DebianPackages) from DEBIAN_MIRROR
// (http://deb.debian.org/debian), built once per machine and kept under
// LAYERPROBE_TEST_CACHE (/var/cache/layerprobe-test). A debootstrap is
// minutes of CPU on a machine that the whole suite keeps busy, and two
// test packages, in two processes, need one: a file lock makes the second
// wait for the first one's build instead of starting its own. The tree is
// shared: copy it (CopyTree) and never change it.
func DebianRoot(t testing.TB) string {
	t.Helper()
	h := sha256.Sum256([]byte("layerprobe debian root 1 bookworm minbase " + DebianPackages))
	base := cmp.Or(os.Getenv("LAYERPROBE_TEST_CACHE"), "/var/cache/layerprobe-test")
	dir := filepath.Join(base, "debian-"+hex.EncodeToString(h[:])[:16])
	if fileExists(dir) {
		return dir
	}
	if err := os.MkdirAll(base, 0o755); err != nil {
		t.Fatal(err)
	}
	lock, err := os.OpenFile(dir+".lock", os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	start := time.Now()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatalf("lock %s: %v", lock.Name(), err)
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN) //nolint:errcheck // closing the file unlocks too
	if fileExists(dir) {
		t.Logf("Debian root built by another test process; waited %s", time.Since(start).Round(time.Second))
		return dir
	}
	debootstrap, err := exec.LookPath("debootstrap")
	if err != nil {
		if debootstrap = "/usr/sbin/debootstrap"; !fileExists(debootstrap) {
			SkipOrFail(t, "debootstrap: %v (scripts/install-deps.sh installs it)", err)
		}
	}
	tmp, err := os.MkdirTemp(base, "building-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	root := filepath.Join(tmp, "root")
	mirror := cmp.Or(os.Getenv("DEBIAN_MIRROR"), "http://deb.debian.org/debian")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, debootstrap, "--variant=minbase", "--include="+DebianPackages, "bookworm", root, mirror).CombinedOutput()
	if err != nil {
		t.Fatalf("debootstrap: %v\n%s", err, Tail(string(out), 30))
	}
	// What no copy needs: the downloaded packages (apt wants their
	// directory).
	debs, _ := filepath.Glob(filepath.Join(root, "var/cache/apt/archives/*.deb"))
	for _, d := range debs {
		_ = os.Remove(d)
	}
	if err := os.Rename(root, dir); err != nil {
		t.Fatal(err)
	}
	t.Logf("Debian root (debootstrap with %s) built in %s", DebianPackages, time.Since(start).Round(time.Second))
	return dir
}

// CopyTree copies the tree at src to dst (which must not exist) with
// owners, modes, links and extended attributes, leaving out the paths
// given in exclude (relative to src, such as "usr/lib/modules"): a copy
// that would delete them afterwards writes them first, hundreds of MiB.
func CopyTree(t testing.TB, src, dst string, exclude ...string) {
	t.Helper()
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	pack := TarCommand(src, exclude...)
	unpack := exec.Command("tar", "--numeric-owner", "--xattrs", "--xattrs-include=*", "-C", dst, "-xpf", "-")
	// An os.Pipe that this process closes once both have started: if one
	// end dies, the other sees EOF or EPIPE instead of waiting forever.
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	var packErr, unpackOut bytes.Buffer
	pack.Stdout, pack.Stderr = w, &packErr
	unpack.Stdin, unpack.Stdout, unpack.Stderr = r, &unpackOut, &unpackOut
	perr := pack.Start()
	uerr := unpack.Start()
	r.Close()
	w.Close()
	if perr == nil {
		perr = pack.Wait()
	}
	if uerr == nil {
		uerr = unpack.Wait()
	}
	if perr != nil {
		t.Fatalf("tar -c %s: %v\n%s", src, perr, Tail(packErr.String(), 20))
	}
	if uerr != nil {
		t.Fatalf("tar -x into %s: %v\n%s", dst, uerr, Tail(unpackOut.String(), 20))
	}
}

// TarCommand is tar writing the tree at dir to its standard output with
// owners (numeric), modes, links and extended attributes, leaving out the
// paths in exclude (tar patterns relative to dir, such as "usr/bin/ctr*").
func TarCommand(dir string, exclude ...string) *exec.Cmd {
	args := []string{"--numeric-owner", "--xattrs", "--xattrs-include=*", "-C", dir}
	for _, p := range exclude {
		args = append(args, "--exclude=./"+strings.TrimPrefix(p, "/"))
	}
	return exec.Command("tar", append(args, "-cf", "-", ".")...)
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
