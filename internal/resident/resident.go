// Package resident hands the pages of the running executable back to the
// kernel while the agent idles.
//
// Why: on current kernels a Go binary's code and read-only data end up
// almost wholly resident, although a long-running process uses a fraction
// of them. The page cache holds an executable in large folios (measured
// on Linux 6.18 with ext4; a read-around of read_ahead_kb, 8 MiB there,
// brings them in at the first faults), and a fault maps the whole folio
// around the page touched. The agent's binary is about 23 MiB of code and
// read-only data; its resident file pages were 20 MiB after a cycle, its
// heap 2 MiB (docs/configuration.md, "The agent's memory").
package resident

// Trimmed is what TrimExecutable did.
type Trimmed struct {
	// Mapped is the size of the executable's read-only mappings advised.
	Mapped int64
	// RSSFileBefore and RSSFileAfter are the process's resident file pages
	// (RssFile of /proc/self/status) before and after; 0 where unknown.
	RSSFileBefore, RSSFileAfter int64
}
