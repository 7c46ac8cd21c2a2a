package docker

import (
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// TestMain lets the test binary double as the probe image's helper, so these
// tests run the probe container without layerprobe's CLI:
//
//	engine.test probe-helper idle        block until SIGTERM or SIGINT, reaping orphans
//	engine.test probe-helper kill-fio    SIGKILL every process named fio
//	engine.test probe-helper count-fio   print how many live processes are named fio
//	engine.test probe-helper exit N      print to stdout and stderr, exit N
//	engine.test probe-helper write F S   write S to file F
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "probe-helper" {
		os.Exit(helperMain(os.Args[2:]))
	}
	os.Exit(m.Run())
}

func helperMain(args []string) int {
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, "probe-helper: no verb")
		return 2
	}
	switch args[0] {
	case "idle":
		// As PID 1 it inherits fio's job processes when their parent is
		// killed; unreaped, they would stay as zombies named fio.
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
		for s := range sig {
			if s != syscall.SIGCHLD {
				return 0
			}
			for {
				pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
				if pid <= 0 || err != nil {
					break
				}
			}
		}
		return 0
	case "kill-fio":
		for _, pid := range pidsNamed("fio") {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		return 0
	case "count-fio":
		fmt.Println(len(pidsNamed("fio")))
		return 0
	case "exit":
		code, _ := strconv.Atoi(args[1])
		fmt.Fprint(os.Stdout, "to stdout")
		fmt.Fprint(os.Stderr, "to stderr")
		return code
	case "write":
		if err := os.WriteFile(args[1], []byte(args[2]), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		return 0
	}
	fmt.Fprintf(os.Stderr, "probe-helper: unknown verb %q\n", args[0])
	return 2
}

func pidsNamed(name string) []int {
	var pids []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		// comm and state from stat: "pid (comm) S ..."; zombies are not counted.
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		open, close := strings.IndexByte(string(stat), '('), strings.LastIndexByte(string(stat), ')')
		if open < 0 || close < open || close+2 >= len(stat) {
			continue
		}
		if string(stat[open+1:close]) == name && stat[close+2] != 'Z' {
			pids = append(pids, pid)
		}
	}
	return pids
}
