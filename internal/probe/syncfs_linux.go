package probe

import (
	"os"

	"golang.org/x/sys/unix"
)

// syncDataRoot flushes the data root's file system (syncfs).
func (s *Session) syncDataRoot() {
	f, err := os.Open(s.Info.DataRoot)
	if err != nil {
		return
	}
	defer f.Close()
	if err := unix.Syncfs(int(f.Fd())); err != nil {
		s.logger.Debug("syncfs of the data root failed", "err", err)
	}
}
