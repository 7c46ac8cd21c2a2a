// Command fakefio stands in for fio in layerprobe's fault tests. It is a
// static binary, so the probe image (built from whatever fio.binary names)
// carries it too and both arms of a cycle run the same fake.
//
// "--version" prints the real fio's version, so layerprobe's version check
// between host and probe image passes. Any other invocation leaves a 1 MiB
// file in the job directory (--directory=), as a real fio leaves its job
// file when it dies, and then, by the mode compiled in with
// -ldflags "-X main.mode=...":
//
//	crash  dies from SIGSEGV, as a crashing C program does
//	hang   sleeps until it is killed (SIGTERM ends it)
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
	"unsafe"
)

var (
	version = "fio-0.0"
	mode    = "crash"
)

func main() {
	if len(os.Args) == 2 && os.Args[1] == "--version" {
		fmt.Println(version)
		return
	}
	for _, a := range os.Args[1:] {
		if d, ok := strings.CutPrefix(a, "--directory="); ok {
			d = strings.ReplaceAll(d, `\:`, ":")
			_ = os.WriteFile(filepath.Join(d, "fakefio.0.0"), make([]byte, 1<<20), 0o600)
		}
	}
	switch mode {
	case "crash":
		segfault()
	case "hang":
		for {
			time.Sleep(time.Hour)
		}
	}
	fmt.Fprintln(os.Stderr, "fakefio: unknown mode", mode)
	os.Exit(3)
}

// segfault ends the process the way a segmentation fault ends a C program:
// killed by SIGSEGV. The Go runtime would turn a fault into a panic (exit
// 2), so SIGSEGV gets its default action back first, and no core is dumped.
func segfault() {
	_ = syscall.Setrlimit(syscall.RLIMIT_CORE, &syscall.Rlimit{})
	var act [64]byte // a zeroed kernel sigaction: SIG_DFL, no flags, empty mask
	_, _, _ = syscall.RawSyscall6(syscall.SYS_RT_SIGACTION, uintptr(syscall.SIGSEGV),
		uintptr(unsafe.Pointer(&act[0])), 0, 8, 0, 0)
	_ = syscall.Kill(os.Getpid(), syscall.SIGSEGV)
	time.Sleep(5 * time.Second)
	os.Exit(139)
}
