package testharness

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
)

// ReleaseTags are the build tags of `make build` (the Makefile's GO_TAGS):
// gin without its MessagePack codec.
const ReleaseTags = "nomsgpack"

// HookTags are ReleaseTags and testhooks: the binary that ships, with the
// LAYERPROBE_TEST_* hooks of cmd/layerprobe/testhooks.go that the tests and
// the benchmark use to inject faults and shorten waits.
const HookTags = ReleaseTags + ",testhooks"

// Build builds cmd/layerprobe into out the way `make build` does
// (CGO_ENABLED=0, -trimpath) with the given build tags: ReleaseTags for
// the shipped binary, "" for the one without them.
func Build(ctx context.Context, out, tags string) error {
	return buildPackage(ctx, out, "./cmd/layerprobe", tags)
}

// BuildStripped builds cmd/layerprobe into out as the release archives
// ship it (.goreleaser.yaml): ReleaseTags, CGO_ENABLED=0, -trimpath, and
// without the symbol table and DWARF (-ldflags -s -w). Its size is the
// one the footprint budget counts.
func BuildStripped(ctx context.Context, out string) error {
	root, err := moduleRoot(ctx)
	if err != nil {
		return err
	}
	return buildFlags(ctx, root, out, "./cmd/layerprobe", ReleaseTags, "-s -w")
}

// buildPackage builds the main package pkg (relative to the module root)
// into out as a static binary (CGO_ENABLED=0, -trimpath).
func buildPackage(ctx context.Context, out, pkg, tags string) error {
	root, err := moduleRoot(ctx)
	if err != nil {
		return err
	}
	return buildIn(ctx, root, out, pkg, tags)
}

// BuildIn is Build from the source tree at root: another checkout of the
// repository, such as an earlier revision to compare with.
func BuildIn(ctx context.Context, root, out, tags string) error {
	return buildIn(ctx, root, out, "./cmd/layerprobe", tags)
}

func buildIn(ctx context.Context, root, out, pkg, tags string) error {
	return buildFlags(ctx, root, out, pkg, tags, "")
}

// buildFlags is buildIn with extra -ldflags before the version's.
func buildFlags(ctx context.Context, root, out, pkg, tags, ldflags string) error {
	args := []string{"build", "-trimpath"}
	if tags != "" {
		args = append(args, "-tags", tags)
	}
	if ld := strings.TrimSpace(ldflags + " " + VersionLDFlags(root)); ld != "" {
		args = append(args, "-ldflags", ld)
	}
	cmd := exec.CommandContext(ctx, "go", append(args, "-o", out, pkg)...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %w\n%s", pkg, err, b)
	}
	return nil
}

// productModule is the module path of the product, whose root holds
// cmd/layerprobe.
const productModule = "github.com/layerprobe/layerprobe"

// VersionLDFlags are the -ldflags `make build` sets from the VERSION file
// in root (the version only; no revision or date, so builds repeat): ""
// for a tree without one, such as an earlier revision.
func VersionLDFlags(root string) string {
	b, err := os.ReadFile(filepath.Join(root, "VERSION"))
	if err != nil {
		return ""
	}
	v := strings.TrimSpace(string(b))
	if v == "" {
		return ""
	}
	return "-X github.com/layerprobe/layerprobe/internal/version.Version=" + v
}

// moduleRoot is the directory of layerprobe's go.mod, wherever the test
// runs from: the product's module, or one nested in it (bench/).
func moduleRoot(ctx context.Context) (string, error) {
	gomod, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("locate the module: %w", err)
	}
	p := strings.TrimSpace(string(gomod))
	if p == "" || p == os.DevNull {
		return "", fmt.Errorf("locate the module: not inside it")
	}
	for dir := filepath.Dir(p); ; dir = filepath.Dir(dir) {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && modulePath(b) == productModule {
			return dir, nil
		}
		if dir == filepath.Dir(dir) {
			return "", fmt.Errorf("locate the module: no go.mod of %s above %s", productModule, p)
		}
	}
}

// modulePath is the path on a go.mod's module line, unquoted, or "".
func modulePath(gomod []byte) string {
	for line := range strings.Lines(string(gomod)) {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "module "); ok {
			return strings.Trim(strings.TrimSpace(rest), `"`)
		}
	}
	return ""
}

var built struct {
	once sync.Once
	dir  string
	bin  string
	err  error
}

// Binary returns the release layerprobe binary with the test hooks
// (HookTags), building it on the first call of the test process; RemoveBinary deletes it when the tests are
// done (from TestMain, after m.Run).
func Binary() (string, error) {
	built.once.Do(func() {
		built.dir, built.err = os.MkdirTemp("", "layerprobe-bin")
		if built.err != nil {
			return
		}
		// Traversable: some tests run the binary as an unprivileged user.
		if built.err = os.Chmod(built.dir, 0o755); built.err != nil {
			return
		}
		built.bin = filepath.Join(built.dir, "layerprobe")
		built.err = Build(context.Background(), built.bin, HookTags)
	})
	return built.bin, built.err
}

// RemoveBinary removes what Binary built, if anything.
func RemoveBinary() {
	if built.dir != "" {
		_ = os.RemoveAll(built.dir)
	}
}
