package advisor

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeHost is a /proc and cgroup tree in a temporary directory: a
// mountinfo naming the cgroup mounts, and the files the kernel would show.
type fakeHost struct {
	t    *testing.T
	proc string // the fake /proc
	cg   string // where the fake cgroup file systems are "mounted"
}

func newFakeHost(t *testing.T) *fakeHost {
	dir := t.TempDir()
	h := &fakeHost{t: t, proc: filepath.Join(dir, "proc"), cg: filepath.Join(dir, "cgroup")}
	h.write(filepath.Join(h.proc, "self", "mountinfo"), "")
	return h
}

func (h *fakeHost) write(path, content string) {
	h.t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		h.t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		h.t.Fatal(err)
	}
}

// mount adds a cgroup mount to the fake mountinfo: v1 blkio (with a v2
// hierarchy that has no io controller beside it, as a hybrid host has) or
// v2 with io.
func (h *fakeHost) mount(version string) {
	h.t.Helper()
	mi := filepath.Join(h.proc, "self", "mountinfo")
	b, _ := os.ReadFile(mi)
	var line string
	switch version {
	case cgroupV1:
		line = fmt.Sprintf("38 31 0:35 / %s/blkio rw,relatime - cgroup cgroup rw,blkio\n", h.cg)
		line += fmt.Sprintf("41 31 0:38 / %s/unified rw,relatime - cgroup2 cgroup2 rw\n", h.cg)
		h.write(filepath.Join(h.cg, "unified", "cgroup.controllers"), "\n")
	case cgroupV2:
		line = fmt.Sprintf("30 23 0:26 / %s/v2 rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n", h.cg)
		h.write(filepath.Join(h.cg, "v2", "cgroup.controllers"), "cpuset cpu io memory pids\n")
	}
	h.write(mi, "23 1 254:0 / / rw,relatime - ext4 /dev/vda rw\n"+string(b)+line)
}

// process gives pid a /proc/PID/cgroup in the layout of version.
func (h *fakeHost) process(pid int, version, path string) {
	content := "0::" + path + "\n"
	if version == cgroupV1 {
		content = "9:name=systemd:" + path + "\n7:blkio:" + path + "\n4:memory:" + path + "\n0::/\n"
	}
	h.write(filepath.Join(h.proc, fmt.Sprint(pid), "cgroup"), content)
}

const (
	blkioFile = `254:0 Read 4096
254:0 Write 3145728
254:0 Sync 3145728
254:0 Async 4096
254:0 Discard 0
254:0 Total 3149824
7:0 Read 0
7:0 Write 1048576
7:0 Total 1048576
Total 4198400
`
	ioStatFile = "254:0 rbytes=4096 wbytes=3145728 rios=1 wios=3 dbytes=0 dios=0\n7:0 rbytes=0 wbytes=1048576 rios=0 wios=1 dbytes=0 dios=0\n"
)

func TestCgroupWrites(t *testing.T) {
	for _, c := range []struct {
		version, file, content string
	}{
		{cgroupV1, "blkio/docker/ID/blkio.throttle.io_service_bytes_recursive", blkioFile},
		{cgroupV2, "v2/system.slice/docker-ID.scope/io.stat", ioStatFile},
	} {
		t.Run(c.version, func(t *testing.T) {
			h := newFakeHost(t)
			h.mount(c.version)
			rel := "/docker/ID"
			if c.version == cgroupV2 {
				rel = "/system.slice/docker-ID.scope"
			}
			h.process(42, c.version, rel)
			h.write(filepath.Join(h.cg, c.file), c.content)
			cg := cgroups{procRoot: h.proc}

			w, err := cg.written(42, "ID", nil)
			if err != nil || w.bytes != 4<<20 || w.version != c.version {
				t.Errorf("every device: %+v, %v; want 4 MiB from %s", w, err, c.version)
			}
			w, err = cg.written(42, "ID", []string{"254:0"})
			if err != nil || w.bytes != 3<<20 {
				t.Errorf("254:0 only: %+v, %v; want 3 MiB", w, err)
			}
			// Without /proc/PID (another pid namespace) the engine's
			// layouts are tried by ID.
			w, err = cg.written(0, "ID", []string{"7:0"})
			if err != nil || w.bytes != 1<<20 {
				t.Errorf("by ID: %+v, %v; want 1 MiB", w, err)
			}
			if _, err := cg.written(0, "OTHER", nil); err == nil || !strings.Contains(err.Error(), "OTHER") {
				t.Errorf("unknown container: %v, want an error naming it", err)
			}
		})
	}
	h := newFakeHost(t)
	if _, err := (cgroups{procRoot: h.proc}).written(1, "ID", nil); err == nil || !strings.Contains(err.Error(), "no cgroup file system") {
		t.Errorf("no cgroup mounted: %v", err)
	}
	h.mount(cgroupV1)
	h.process(42, cgroupV1, "/docker/ID")
	h.write(filepath.Join(h.cg, "blkio/docker/ID/blkio.throttle.io_service_bytes"), "254:0 Write many\n")
	if _, err := (cgroups{procRoot: h.proc}).written(42, "ID", nil); err == nil || !strings.Contains(err.Error(), "bad line") {
		t.Errorf("malformed counters: %v, want an error naming the line", err)
	}
}

func TestDevicesOfRoot(t *testing.T) {
	d := devices{sysRoot: "/sys"}
	dev, err := d.of("/")
	if err != nil {
		t.Fatalf("devices.of(/): %v", err)
	}
	// The whole disk: its /sys directory has no partition file.
	if _, err := os.Stat(filepath.Join("/sys/dev/block", dev, "partition")); err == nil {
		t.Errorf("devices.of(/) = %s, a partition, want its disk", dev)
	}
	if _, err := d.of("/proc/self"); err == nil {
		t.Errorf("devices.of(/proc/self) = nil error, want one: proc has no disk")
	}
}
