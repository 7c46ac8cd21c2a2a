package resident

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// TrimExecutable hands the executable's resident code and read-only data
// back to the kernel and keeps later faults small:
//
//   - MADV_RANDOM on each read-only mapping of the executable, so that a
//     later fault reads the page it needs rather than a read-around of
//     read_ahead_kb in large folios;
//   - MADV_PAGEOUT on the same ranges, which unmaps their pages from this
//     process (file pages only where the process owns the file or may
//     write it, e.g. root; otherwise this step does nothing);
//   - POSIX_FADV_DONTNEED on the executable, which drops its pages that no
//     process maps from the page cache, so that the large folios are not
//     mapped whole again at the next fault.
//
// Pages the process touches afterwards come back one by one, from the page
// cache or from disk (a few hundred 4 KiB reads per cycle at most, the
// probe reads the whole binary anyway when it copies its helper into a
// container). Nothing of the program's state is lost: the pages are clean
// copies of the file. Errors leave the process as it was.
func TrimExecutable() (Trimmed, error) {
	var t Trimmed
	t.RSSFileBefore = rssFile()
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return t, fmt.Errorf("trim executable: %w", err)
	}
	maps, err := os.Open("/proc/self/maps")
	if err != nil {
		return t, fmt.Errorf("trim executable: %w", err)
	}
	ranges, err := readOnlyMappings(maps, exe)
	maps.Close()
	if err != nil {
		return t, fmt.Errorf("trim executable: /proc/self/maps: %w", err)
	}
	for _, r := range ranges {
		for _, advice := range []uintptr{unix.MADV_RANDOM, unix.MADV_PAGEOUT} {
			// The ranges are the kernel's own mappings, not Go memory:
			// madvise by address, without a slice over them.
			if _, _, errno := unix.Syscall(unix.SYS_MADVISE, r.start, r.end-r.start, advice); errno != 0 {
				return t, fmt.Errorf("trim executable: madvise(%#x-%#x, %d): %w", r.start, r.end, advice, errno)
			}
		}
		t.Mapped += int64(r.end - r.start)
	}
	f, err := os.Open("/proc/self/exe")
	if err != nil {
		return t, fmt.Errorf("trim executable: %w", err)
	}
	defer f.Close()
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		return t, fmt.Errorf("trim executable: fadvise %s: %w", exe, err)
	}
	t.RSSFileAfter = rssFile()
	return t, nil
}

// addrRange is one mapping, [start, end).
type addrRange struct{ start, end uintptr }

// readOnlyMappings returns the mappings of path in a /proc/PID/maps text
// that the process cannot write: code and read-only data. The writable
// ones (data, bss) may hold private copies that MADV_PAGEOUT would swap.
func readOnlyMappings(r io.Reader, path string) ([]addrRange, error) {
	var out []addrRange
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		// 00400000-00f02000 r-xp 00000000 fe:00 9978580   /usr/bin/layerprobe
		fields := strings.Fields(sc.Text())
		if len(fields) < 6 || strings.Join(fields[5:], " ") != path || len(fields[1]) < 2 || fields[1][1] != '-' {
			continue
		}
		lo, hi, ok := strings.Cut(fields[0], "-")
		if !ok {
			return nil, fmt.Errorf("bad address range %q", fields[0])
		}
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		if err := errors.Join(err1, err2); err != nil || end <= start {
			return nil, fmt.Errorf("bad address range %q", fields[0])
		}
		out = append(out, addrRange{uintptr(start), uintptr(end)})
	}
	return out, sc.Err()
}

// rssFile is RssFile of /proc/self/status in bytes, 0 when unknown.
func rssFile() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "RssFile:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				return 0
			}
			return kb << 10
		}
	}
	return 0
}
