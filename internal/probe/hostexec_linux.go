package probe

import "syscall"

// hostSysProcAttr puts the host arm's fio in a process group of its own
// and has the kernel kill it if layerprobe dies first.
func hostSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
