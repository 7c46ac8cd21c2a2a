module github.com/layerprobe/layerprobe/mixin/gen

go 1.26.8

require (
	github.com/google/go-jsonnet v0.22.0
	go.yaml.in/yaml/v3 v3.0.6
)

require (
	golang.org/x/crypto v0.45.0 // indirect
	golang.org/x/sys v0.38.0 // indirect
	sigs.k8s.io/yaml v1.4.0 // indirect
)
