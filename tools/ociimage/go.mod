// The release's OCI image writer: a module of its own, so that nothing it
// needs enters layerprobe's go.mod (it needs the standard library alone).
module github.com/layerprobe/layerprobe/tools/ociimage

go 1.26.8
