package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
)

// imageConfig is the part of an OCI image configuration the Dockerfile
// sets ("config" in the image configuration JSON).
type imageConfig struct {
	User         string              `json:"User,omitempty"`
	ExposedPorts map[string]struct{} `json:"ExposedPorts,omitempty"`
	Env          []string            `json:"Env,omitempty"`
	Entrypoint   []string            `json:"Entrypoint,omitempty"`
	Cmd          []string            `json:"Cmd,omitempty"`
	WorkingDir   string              `json:"WorkingDir,omitempty"`
	Labels       map[string]string   `json:"Labels,omitempty"`
}

// basePath is the PATH of the debootstrap base image
// (deploy/docker/debootstrap-base.sh) and of Debian's official image.
const basePath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// readDockerfile takes the instructions that shape the image's
// configuration; FROM, ARG, RUN and COPY are the files', which the layer
// provides. An instruction it does not know is an error, so that a new
// one in the Dockerfile is not silently left out of this image.
func readDockerfile(file string) (imageConfig, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return imageConfig{}, err
	}
	cfg := imageConfig{Env: []string{basePath}, Labels: map[string]string{}, ExposedPorts: map[string]struct{}{}}
	var logical []string
	cur := ""
	for line := range strings.Lines(string(b)) {
		line = strings.TrimRight(line, "\r\n")
		if t := strings.TrimSpace(line); cur == "" && (t == "" || strings.HasPrefix(t, "#")) {
			continue
		}
		if strings.HasSuffix(line, "\\") {
			cur += strings.TrimSuffix(line, "\\") + " "
			continue
		}
		logical = append(logical, strings.TrimSpace(cur+line))
		cur = ""
	}
	for _, l := range logical {
		instr, args, _ := strings.Cut(l, " ")
		args = strings.TrimSpace(args)
		switch strings.ToUpper(instr) {
		case "FROM", "ARG", "RUN", "COPY":
		case "LABEL":
			kv, err := splitWords(args)
			if err != nil {
				return cfg, fmt.Errorf("%s: LABEL: %w", file, err)
			}
			for _, w := range kv {
				k, v, ok := strings.Cut(w, "=")
				if !ok {
					return cfg, fmt.Errorf("%s: LABEL %q: want key=value", file, w)
				}
				cfg.Labels[k] = v
			}
		case "EXPOSE":
			for p := range strings.FieldsSeq(args) {
				if !strings.Contains(p, "/") {
					p += "/tcp"
				}
				cfg.ExposedPorts[p] = struct{}{}
			}
		case "WORKDIR":
			cfg.WorkingDir = args
		case "USER":
			cfg.User = args
		case "ENTRYPOINT":
			if err := json.Unmarshal([]byte(args), &cfg.Entrypoint); err != nil {
				return cfg, fmt.Errorf("%s: ENTRYPOINT must be JSON: %w", file, err)
			}
		case "CMD":
			if err := json.Unmarshal([]byte(args), &cfg.Cmd); err != nil {
				return cfg, fmt.Errorf("%s: CMD must be JSON: %w", file, err)
			}
		default:
			return cfg, fmt.Errorf("%s: %s is not carried into the OCI image", file, instr)
		}
	}
	return cfg, nil
}

// splitWords splits LABEL's arguments at blanks outside double quotes and
// drops the quotes.
func splitWords(s string) ([]string, error) {
	var words []string
	var w strings.Builder
	inQuote, have := false, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\\' && inQuote && i+1 < len(s):
			i++
			w.WriteByte(s[i])
		case c == '"':
			inQuote, have = !inQuote, true
		case (c == ' ' || c == '\t') && !inQuote:
			if have {
				words = append(words, w.String())
				w.Reset()
				have = false
			}
		default:
			w.WriteByte(c)
			have = true
		}
	}
	if inQuote {
		return nil, fmt.Errorf("unterminated quote in %q", s)
	}
	if have {
		words = append(words, w.String())
	}
	return words, nil
}
