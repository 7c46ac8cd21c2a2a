//go:build bench

package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/layerprobe/layerprobe/internal/testsupport/testharness"
)

// buildOld builds layerprobe as it was at rev into out, with the release
// flags (`make build`), from a temporary detached worktree of this
// repository that is removed again. It returns the full commit.
func buildOld(ctx context.Context, rev, out string) (string, error) {
	src, commit, remove, err := checkout(ctx, rev)
	if err != nil {
		return "", fmt.Errorf("BENCH_OLD_REV=%s: %w", rev, err)
	}
	defer remove()
	if err := testharness.BuildIn(ctx, src, out, testharness.HookTags); err != nil {
		return "", fmt.Errorf("BENCH_OLD_REV=%s: %w", rev, err)
	}
	if _, err := os.Stat(out); err != nil {
		return "", errors.Join(fmt.Errorf("BENCH_OLD_REV=%s: no binary after the build", rev), err)
	}
	return commit, nil
}

// checkout makes a temporary detached worktree of this repository at rev
// and returns its directory, the full commit and a function that removes
// the worktree from git's list as well as from the disk.
func checkout(ctx context.Context, rev string) (dir, commit string, remove func(), err error) {
	if _, err := exec.LookPath("git"); err != nil {
		return "", "", nil, fmt.Errorf("an earlier revision is checked out with git, and git is not installed: %w", err)
	}
	git := func(dir string, args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, "git", args...)
		cmd.Dir = dir
		b, err := cmd.CombinedOutput()
		if err != nil {
			return "", fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(b)))
		}
		return strings.TrimSpace(string(b)), nil
	}
	root, err := git(".", "rev-parse", "--show-toplevel")
	if err != nil {
		return "", "", nil, fmt.Errorf("not inside the repository's git checkout: %w", err)
	}
	commit, err = git(root, "rev-parse", "--verify", "--quiet", rev+"^{commit}")
	if err != nil {
		return "", "", nil, fmt.Errorf("no such commit in %s (fetch it, or name another revision): %w", root, err)
	}
	tmp, err := os.MkdirTemp("", "lpbench-rev-")
	if err != nil {
		return "", "", nil, err
	}
	dir = filepath.Join(tmp, "src")
	remove = func() {
		_, _ = git(root, "worktree", "remove", "--force", dir)
		os.RemoveAll(tmp)
		_, _ = git(root, "worktree", "prune")
	}
	if _, err := git(root, "worktree", "add", "--detach", dir, commit); err != nil {
		remove()
		return "", "", nil, fmt.Errorf("check out %s: %w", rev, err)
	}
	return dir, commit, remove, nil
}
