//go:build !linux

package probe

import "syscall"

// hostSysProcAttr puts the host arm's fio in a process group of its own.
// darwin has no parent-death signal: a SIGKILLed layerprobe leaves its fio
// to finish its (bounded) job and the next run's sweep removes its files.
func hostSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
