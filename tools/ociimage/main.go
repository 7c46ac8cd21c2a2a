// Command ociimage writes the agent's multi-platform image as an OCI image
// layout tarball (an image index with one manifest per platform) without a
// container engine and without running any code of the target
// architecture: each platform's single layer is the files of Debian
// packages (read with `dpkg-deb --fsys-tarfile`, as Debian's usr-merged
// root lays them out) plus the static layerprobe binary. The image's
// configuration (labels, user, working directory, exposed port,
// entrypoint, command) is read from deploy/docker/Dockerfile, so that it is
// the one the docker-built image has.
//
//	ociimage -dockerfile deploy/docker/Dockerfile -name layerprobe:0.1.0 \
//	  -version 0.1.0 -epoch 1767323045 -out dist/layerprobe-0.1.0.oci.tar \
//	  linux/amd64=BINARY=DEBLIST linux/arm64/v8=BINARY=DEBLIST
//
// DEBLIST is a file naming one .deb a line. The output is reproducible:
// entries sorted, owners numeric, every time the epoch's.
package main

import (
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"
)

func main() {
	dockerfile := flag.String("dockerfile", "deploy/docker/Dockerfile", "the Dockerfile whose LABEL, USER, WORKDIR, EXPOSE, ENTRYPOINT and CMD the image takes")
	name := flag.String("name", "", "the image's name (repository:tag)")
	version := flag.String("version", "", "the org.opencontainers.image.version label")
	epoch := flag.Int64("epoch", 0, "every file's and the image's time (SOURCE_DATE_EPOCH)")
	out := flag.String("out", "", "the OCI layout tarball to write")
	flag.Parse()
	if *name == "" || *out == "" || *version == "" || flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: ociimage -name REPO:TAG -version V -epoch SECONDS -out FILE OS/ARCH[/VARIANT]=BINARY=DEBLIST...")
		os.Exit(2)
	}
	if err := run(*dockerfile, *name, *version, time.Unix(*epoch, 0).UTC(), *out, flag.Args()); err != nil {
		slog.Error("ociimage", "err", err)
		os.Exit(1)
	}
}

func run(dockerfile, name, version string, epoch time.Time, out string, specs []string) error {
	cfg, err := readDockerfile(dockerfile)
	if err != nil {
		return err
	}
	cfg.Labels["org.opencontainers.image.version"] = version
	tmp, err := os.MkdirTemp("", "ociimage-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	l := &layout{dir: tmp}
	var manifests []descriptor
	for _, s := range specs {
		parts := strings.Split(s, "=")
		if len(parts) != 3 {
			return fmt.Errorf("%q: want OS/ARCH[/VARIANT]=BINARY=DEBLIST", s)
		}
		p, err := parsePlatform(parts[0])
		if err != nil {
			return err
		}
		debs, err := readList(parts[2])
		if err != nil {
			return err
		}
		m, err := l.image(p, parts[1], debs, cfg, epoch)
		if err != nil {
			return fmt.Errorf("%s: %w", parts[0], err)
		}
		manifests = append(manifests, m)
	}
	return l.write(out, name, manifests, epoch)
}

func readList(file string) ([]string, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var debs []string
	for l := range strings.Lines(string(b)) {
		if l = strings.TrimSpace(l); l != "" {
			debs = append(debs, l)
		}
	}
	if len(debs) == 0 {
		return nil, fmt.Errorf("%s names no package", file)
	}
	return debs, nil
}
