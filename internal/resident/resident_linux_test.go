package resident

import (
	"strings"
	"testing"
)

func TestReadOnlyMappings(t *testing.T) {
	const maps = `00400000-00f02000 r-xp 00000000 fe:00 9978580                            /opt/lp bin/layerprobe
00f02000-01ac8000 r--p 00b02000 fe:00 9978580                            /opt/lp bin/layerprobe
01ac8000-01ba3000 rw-p 016c8000 fe:00 9978580                            /opt/lp bin/layerprobe
01ba3000-03bf0000 rw-p 00000000 00:00 0
7f9bd5e1a000-7f9bd5e22000 rw-s 00000000 fe:00 9980530                    /var/lib/layerprobe/layerprobe.db-shm
7f9bd5e22000-7f9bd5e32000 r--p 00000000 fe:00 9980531                    /usr/lib/other
7ffdf5078000-7ffdf5099000 rw-p 00000000 00:00 0                          [stack]
`
	got, err := readOnlyMappings(strings.NewReader(maps), "/opt/lp bin/layerprobe")
	if err != nil {
		t.Fatal(err)
	}
	want := []addrRange{{0x400000, 0xf02000}, {0xf02000, 0x1ac8000}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("readOnlyMappings = %#v, want %#v (code and read-only data of the binary, not its data, not other files)", got, want)
	}
	if _, err := readOnlyMappings(strings.NewReader("zz-00f02000 r-xp 0 fe:00 1 /opt/x\n"), "/opt/x"); err == nil {
		t.Error("a bad address range was accepted")
	}
}

// The test binary trims its own pages: its resident file pages shrink, and
// it goes on running (this test's next lines, the testing package's
// reporting) from pages faulted back in.
func TestTrimExecutable(t *testing.T) {
	tr, err := TrimExecutable()
	if err != nil {
		t.Fatal(err)
	}
	if tr.Mapped <= 0 || tr.RSSFileBefore <= 0 {
		t.Fatalf("TrimExecutable = %+v: no read-only mapping of the executable found, or no RssFile", tr)
	}
	if tr.RSSFileAfter >= tr.RSSFileBefore {
		t.Errorf("RssFile %d KiB before, %d KiB after: nothing handed back", tr.RSSFileBefore>>10, tr.RSSFileAfter>>10)
	}
	t.Logf("mapped %d KiB, RssFile %d KiB -> %d KiB", tr.Mapped>>10, tr.RSSFileBefore>>10, tr.RSSFileAfter>>10)
}
