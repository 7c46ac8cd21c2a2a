package probeimage

import (
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
)

// ldSoCache is the dynamic loader's cache of /etc/ld.so.conf directories.
const ldSoCache = "/etc/ld.so.cache"

// dep is a file the loader opens: where it is in the image and on the host.
// They differ only below a $ORIGIN-relative run path of a binary placed at
// another path in the image than on the host.
type dep struct {
	image, host string
}

// resolver finds an ELF binary's interpreter and shared libraries the way
// glibc's loader does: DT_RPATH (when there is no DT_RUNPATH), DT_RUNPATH,
// the /etc/ld.so.conf directories (the loader reads them through its
// cache) and the built-in system directories.
type resolver struct {
	confDirs []string
	// needsCache is set when some library was found only in an
	// /etc/ld.so.conf directory: inside the container the loader finds it
	// only through /etc/ld.so.cache.
	needsCache bool
}

func newResolver() (*resolver, error) {
	dirs, err := readLdSoConf("/etc/ld.so.conf", 0)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	return &resolver{confDirs: dirs}, nil
}

// readLdSoConf returns the directories named in an ld.so.conf file,
// following its include lines.
func readLdSoConf(file string, depth int) ([]string, error) {
	if depth > 8 {
		return nil, fmt.Errorf("%s: includes nested too deeply", file)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var dirs []string
	for line := range strings.SplitSeq(string(b), "\n") {
		line, _, _ = strings.Cut(line, "#")
		fields := strings.FieldsFunc(line, func(r rune) bool { return r == ' ' || r == '\t' || r == ':' || r == ',' })
		if len(fields) == 0 {
			continue
		}
		switch fields[0] {
		case "include":
			for _, pat := range fields[1:] {
				if !filepath.IsAbs(pat) {
					pat = filepath.Join(filepath.Dir(file), pat)
				}
				matches, _ := filepath.Glob(pat)
				slices.Sort(matches)
				for _, m := range matches {
					sub, err := readLdSoConf(m, depth+1)
					if err != nil && !errors.Is(err, os.ErrNotExist) {
						return nil, err
					}
					dirs = append(dirs, sub...)
				}
			}
		case "hwcap":
		default:
			for _, f := range fields {
				if filepath.IsAbs(f) {
					dirs = append(dirs, filepath.Clean(f))
				}
			}
		}
	}
	return dirs, nil
}

// systemDirs are the directories glibc's loader searches last, without any
// configuration: the multiarch directories (Debian, Ubuntu), lib64 (Fedora,
// SUSE, Arch) and lib.
func systemDirs(m elf.Machine) []string {
	var dirs []string
	if t := multiarchTriplet(m); t != "" {
		dirs = append(dirs, "/lib/"+t, "/usr/lib/"+t)
	}
	return append(dirs, "/lib64", "/usr/lib64", "/lib", "/usr/lib")
}

func multiarchTriplet(m elf.Machine) string {
	switch m {
	case elf.EM_X86_64:
		return "x86_64-linux-gnu"
	case elf.EM_AARCH64:
		return "aarch64-linux-gnu"
	case elf.EM_386:
		return "i386-linux-gnu"
	case elf.EM_ARM:
		return "arm-linux-gnueabihf"
	case elf.EM_PPC64:
		return "powerpc64le-linux-gnu"
	case elf.EM_S390:
		return "s390x-linux-gnu"
	case elf.EM_RISCV:
		return "riscv64-linux-gnu"
	}
	return ""
}

// object is an ELF file the loader maps, with what it needs.
type object struct {
	dep
	needed  []string
	rpath   []string // DT_RPATH entries, used only without DT_RUNPATH
	runpath []string
}

// dependencies returns the interpreter and every shared library the binary
// at host (placed at image in the image) loads, transitively. A static
// binary has none.
func (r *resolver) dependencies(image, host string) ([]dep, error) {
	f, err := elf.Open(host)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	class, machine := f.Class, f.Machine

	var out []dep
	for _, p := range f.Progs {
		if p.Type != elf.PT_INTERP {
			continue
		}
		b := make([]byte, p.Filesz)
		if _, err := p.ReadAt(b, 0); err != nil {
			return nil, fmt.Errorf("read PT_INTERP: %w", err)
		}
		interp := strings.TrimRight(string(b), "\x00")
		if !path.IsAbs(interp) {
			return nil, fmt.Errorf("interpreter %q is not an absolute path", interp)
		}
		out = append(out, dep{image: interp, host: interp})
	}

	exe, err := readObject(f, dep{image: image, host: host})
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{image: true}
	for _, d := range out {
		seen[d.image] = true
	}
	queue := []object{exe}
	for len(queue) > 0 {
		obj := queue[0]
		queue = queue[1:]
		for _, name := range obj.needed {
			d, fromConf, err := r.find(name, obj, exe, class, machine)
			if err != nil {
				return nil, fmt.Errorf("%s (needed by %s): %w", name, obj.host, err)
			}
			r.needsCache = r.needsCache || fromConf
			if seen[d.image] {
				continue
			}
			seen[d.image] = true
			out = append(out, d)
			lf, err := elf.Open(d.host)
			if err != nil {
				return nil, err
			}
			lib, err := readObject(lf, d)
			lf.Close()
			if err != nil {
				return nil, err
			}
			queue = append(queue, lib)
		}
	}
	return out, nil
}

func readObject(f *elf.File, d dep) (object, error) {
	o := object{dep: d}
	var err error
	if o.needed, err = f.ImportedLibraries(); err != nil {
		return o, fmt.Errorf("%s: DT_NEEDED: %w", d.host, err)
	}
	rp, err := f.DynString(elf.DT_RPATH)
	if err != nil {
		return o, fmt.Errorf("%s: DT_RPATH: %w", d.host, err)
	}
	rup, err := f.DynString(elf.DT_RUNPATH)
	if err != nil {
		return o, fmt.Errorf("%s: DT_RUNPATH: %w", d.host, err)
	}
	for _, s := range rp {
		o.rpath = append(o.rpath, strings.Split(s, ":")...)
	}
	for _, s := range rup {
		o.runpath = append(o.runpath, strings.Split(s, ":")...)
	}
	return o, nil
}

// find locates the library name needed by obj. fromConf reports that it
// was found only through an /etc/ld.so.conf directory.
func (r *resolver) find(name string, obj, exe object, class elf.Class, machine elf.Machine) (d dep, fromConf bool, err error) {
	if strings.Contains(name, "/") {
		if !path.IsAbs(name) {
			return dep{}, false, fmt.Errorf("relative library path %q is not supported", name)
		}
		name = path.Clean(name)
		if !compatible(name, class, machine) {
			return dep{}, false, errors.New("not a compatible ELF library")
		}
		return dep{image: name, host: name}, false, nil
	}
	// Run paths: $ORIGIN is the directory of the object that asks, which
	// differs between host and image for the binaries placed under /lp.
	var runDirs []dep
	expand := func(o object, entries []string) {
		for _, e := range entries {
			if e == "" {
				continue
			}
			runDirs = append(runDirs, dep{image: expandOrigin(e, path.Dir(o.image)), host: expandOrigin(e, path.Dir(o.host))})
		}
	}
	if len(obj.runpath) == 0 {
		expand(obj, obj.rpath)
		if obj.host != exe.host {
			expand(exe, exe.rpath)
		}
	}
	expand(obj, obj.runpath)
	for _, dir := range runDirs {
		if !path.IsAbs(dir.host) || !path.IsAbs(dir.image) {
			continue
		}
		if p := path.Join(dir.host, name); compatible(p, class, machine) {
			return dep{image: path.Join(dir.image, name), host: p}, false, nil
		}
	}
	sys := systemDirs(machine)
	for _, dir := range r.confDirs {
		if p := path.Join(dir, name); compatible(p, class, machine) {
			return dep{image: p, host: p}, !slices.Contains(sys, dir), nil
		}
	}
	for _, dir := range sys {
		if p := path.Join(dir, name); compatible(p, class, machine) {
			return dep{image: p, host: p}, false, nil
		}
	}
	return dep{}, false, errors.New("not found in the run paths, /etc/ld.so.conf or the system directories")
}

// expandOrigin replaces $ORIGIN / ${ORIGIN} in a run path entry.
func expandOrigin(entry, origin string) string {
	entry = strings.ReplaceAll(entry, "${ORIGIN}", origin)
	return path.Clean(strings.ReplaceAll(entry, "$ORIGIN", origin))
}

// compatible reports whether p is an ELF file of the binary's class and
// machine: the multiarch and lib directories can hold other architectures'
// libraries of the same name, which the loader skips too.
func compatible(p string, class elf.Class, machine elf.Machine) bool {
	f, err := elf.Open(p)
	if err != nil {
		return false
	}
	defer f.Close()
	return f.Class == class && f.Machine == machine
}
