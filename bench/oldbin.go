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
	if _, err := exec.LookPath("git"); err != nil {
		return "", fmt.Errorf("BENCH_OLD_REV=%s: the earlier method is built from git, and git is not installed: %w", rev, err)
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
		return "", fmt.Errorf("BENCH_OLD_REV=%s: not inside the repository's git checkout: %w", rev, err)
	}
	commit, err := git(root, "rev-parse", "--verify", "--quiet", rev+"^{commit}")
	if err != nil {
		return "", fmt.Errorf("BENCH_OLD_REV=%s: no such commit in %s (fetch it, or name another revision): %w", rev, root, err)
	}
	tmp, err := os.MkdirTemp("", "lpbench-old-")
	if err != nil {
		return "", err
	}
	src := filepath.Join(tmp, "src")
	defer func() {
		// Remove the worktree from git's list as well as from the disk,
		// whatever happened.
		_, _ = git(root, "worktree", "remove", "--force", src)
		os.RemoveAll(tmp)
		_, _ = git(root, "worktree", "prune")
	}()
	if _, err := git(root, "worktree", "add", "--detach", src, commit); err != nil {
		return "", fmt.Errorf("BENCH_OLD_REV=%s: check out: %w", rev, err)
	}
	if err := testharness.BuildIn(ctx, src, out, testharness.HookTags); err != nil {
		return "", fmt.Errorf("BENCH_OLD_REV=%s: %w", rev, err)
	}
	if _, err := os.Stat(out); err != nil {
		return "", errors.Join(fmt.Errorf("BENCH_OLD_REV=%s: no binary after the build", rev), err)
	}
	return commit, nil
}
