package advisor

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/prometheus/procfs"
)

// Cgroup versions, as reported.
const (
	cgroupV1 = "v1"
	cgroupV2 = "v2"
)

// noteV1 is said of every cgroup v1 figure: v1 has no writeback
// accounting, so what the kernel writes out on its own (buffered writes it
// flushes in the background, btrfs's worker threads) is charged to the
// root cgroup, not the container's.
const noteV1 = "cgroup v1 charges the container only with the writes its own processes submit; " +
	"what the kernel writes out for it (background flushing, btrfs worker threads) is charged to the root cgroup, " +
	"so this can be far less than it wrote"

// cgroups reads block I/O counters of containers from the cgroup file
// systems, v1 (blkio) or v2 (io), as this host mounts them.
type cgroups struct {
	procRoot string // /proc
}

// blockWrites is what a container's cgroup says it wrote.
type blockWrites struct {
	bytes   int64
	version string
}

// written sums the bytes written to the given block devices ("major:minor";
// none = every device) charged to the cgroup of the container with this
// init pid and id. It finds the cgroup through /proc/PID/cgroup and, when
// that cannot be read (the agent in another pid namespace), tries the
// layouts Docker's cgroupfs and systemd drivers use.
func (c cgroups) written(pid int, id string, devices []string) (blockWrites, error) {
	v1, v2, err := c.mounts()
	if err != nil {
		return blockWrites{}, err
	}
	var rel1, rel2 string
	if pid > 0 {
		if fs, err := procfs.NewFS(c.procRoot); err == nil {
			if proc, err := fs.Proc(pid); err == nil {
				if cgs, err := proc.Cgroups(); err == nil {
					for _, cg := range cgs {
						switch {
						case cg.HierarchyID == 0:
							rel2 = cg.Path
						case slices.Contains(cg.Controllers, "blkio"):
							rel1 = cg.Path
						}
					}
				}
			}
		}
	}
	// v1 first: on a hybrid host the v2 hierarchy holds no io controller.
	if v1 != "" {
		for _, dir := range candidates(v1, rel1, id) {
			for _, f := range []string{"blkio.throttle.io_service_bytes_recursive", "blkio.throttle.io_service_bytes"} {
				b, err := os.ReadFile(filepath.Join(dir, f))
				if err != nil {
					continue
				}
				n, err := parseBlkio(b, devices)
				if err != nil {
					return blockWrites{}, fmt.Errorf("%s: %w", filepath.Join(dir, f), err)
				}
				return blockWrites{bytes: n, version: cgroupV1}, nil
			}
		}
	}
	if v2 != "" {
		for _, dir := range candidates(v2, rel2, id) {
			b, err := os.ReadFile(filepath.Join(dir, "io.stat"))
			if err != nil {
				continue
			}
			n, err := parseIOStat(b, devices)
			if err != nil {
				return blockWrites{}, fmt.Errorf("%s: %w", filepath.Join(dir, "io.stat"), err)
			}
			return blockWrites{bytes: n, version: cgroupV2}, nil
		}
	}
	if v1 == "" && v2 == "" {
		return blockWrites{}, errors.New("no cgroup file system with block I/O accounting is mounted")
	}
	return blockWrites{}, fmt.Errorf("no block I/O counters found for container %s", shortID(id))
}

// candidates are the directories that may hold a container's counters
// under a hierarchy mounted at root: the one /proc named, then Docker's
// cgroupfs and systemd layouts.
func candidates(root, rel, id string) []string {
	var out []string
	if rel != "" && rel != "/" {
		out = append(out, filepath.Join(root, rel))
	}
	return append(out,
		filepath.Join(root, "docker", id),
		filepath.Join(root, "system.slice", "docker-"+id+".scope"))
}

// parseBlkio sums the Write lines of a v1 blkio.throttle.io_service_bytes
// file ("8:0 Write 4096") over the devices.
func parseBlkio(b []byte, devices []string) (int64, error) {
	var sum int64
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 3 || f[1] != "Write" || !counted(f[0], devices) {
			continue
		}
		n, err := strconv.ParseInt(f[2], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("bad line %q", sc.Text())
		}
		sum += n
	}
	return sum, sc.Err()
}

// parseIOStat sums wbytes of a v2 io.stat file ("8:0 rbytes=.. wbytes=..")
// over the devices.
func parseIOStat(b []byte, devices []string) (int64, error) {
	var sum int64
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 || !counted(f[0], devices) {
			continue
		}
		for _, kv := range f[1:] {
			v, ok := strings.CutPrefix(kv, "wbytes=")
			if !ok {
				continue
			}
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return 0, fmt.Errorf("bad line %q", sc.Text())
			}
			sum += n
		}
	}
	return sum, sc.Err()
}

func counted(dev string, devices []string) bool {
	return len(devices) == 0 || slices.Contains(devices, dev)
}
