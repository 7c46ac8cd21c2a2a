package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	promconfig "github.com/prometheus/common/config"
	"github.com/spf13/pflag"

	"github.com/layerprobe/layerprobe/api"
)

// agentClientOptions are how a command reaches a running agent: its URL and
// the TLS and authentication a Prometheus server would use to scrape it.
// The flags name the keys of Prometheus' HTTP client configuration
// (prometheus/common/config.HTTPClientConfig: tls_config, basic_auth,
// authorization), and --http.config.file takes such a file whole, as
// promtool and amtool do.
type agentClientOptions struct {
	URL     string
	Timeout time.Duration

	HTTPConfigFile string

	CAFile             string
	CertFile           string
	KeyFile            string
	ServerName         string
	InsecureSkipVerify bool

	BasicAuthUsername     string
	BasicAuthPasswordFile string
	BearerTokenFile       string
}

func (o *agentClientOptions) addFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.URL, "url", "http://127.0.0.1:9811", "base URL of the agent (https:// when it serves TLS)")
	fs.DurationVar(&o.Timeout, "timeout", 10*time.Second, "request timeout")
	fs.StringVar(&o.HTTPConfigFile, "http.config.file", "", "Prometheus HTTP client configuration file (tls_config, basic_auth, authorization, ...), as promtool takes; not combined with the --tls.*, --basic-auth.* and --bearer-token-file flags")
	fs.StringVar(&o.CAFile, "tls.ca-file", "", "CA certificate file to verify the agent's certificate with")
	fs.StringVar(&o.CertFile, "tls.cert-file", "", "client certificate file, for an agent that requires one (with --tls.key-file)")
	fs.StringVar(&o.KeyFile, "tls.key-file", "", "client certificate's private key file")
	fs.StringVar(&o.ServerName, "tls.server-name", "", "server name to verify the agent's certificate against (default: the URL's host)")
	fs.BoolVar(&o.InsecureSkipVerify, "tls.insecure-skip-verify", false, "do not verify the agent's certificate")
	fs.StringVar(&o.BasicAuthUsername, "basic-auth.username", "", "basic auth user name (a user of the agent's --web.config.file)")
	fs.StringVar(&o.BasicAuthPasswordFile, "basic-auth.password-file", "", "file holding the basic auth password")
	fs.StringVar(&o.BearerTokenFile, "bearer-token-file", "", "file holding a bearer token sent as Authorization: Bearer")
}

// httpConfig is the Prometheus HTTP client configuration the flags (or
// --http.config.file) describe.
func (o *agentClientOptions) httpConfig(fs *pflag.FlagSet) (promconfig.HTTPClientConfig, error) {
	if o.HTTPConfigFile != "" {
		for _, name := range []string{"tls.ca-file", "tls.cert-file", "tls.key-file", "tls.server-name", "tls.insecure-skip-verify",
			"basic-auth.username", "basic-auth.password-file", "bearer-token-file"} {
			if fs.Changed(name) {
				return promconfig.HTTPClientConfig{}, usageError{fmt.Errorf("--http.config.file and --%s: set TLS and authentication in one place", name)}
			}
		}
		c, _, err := promconfig.LoadHTTPConfigFile(o.HTTPConfigFile)
		if err != nil {
			return promconfig.HTTPClientConfig{}, usageError{fmt.Errorf("--http.config.file: %w", err)}
		}
		return *c, nil
	}
	c := promconfig.DefaultHTTPClientConfig
	// HTTP/1.1: one small request buys nothing from HTTP/2, and when the
	// agent refuses a connection without a client certificate (TLS 1.3
	// sends that alert after the handshake) Go's HTTP/2 client can report
	// only "http2: client conn could not be established", where HTTP/1.1
	// reports the alert ("tls: certificate required") or the closed
	// connection. A --http.config.file keeps its own enable_http2.
	c.EnableHTTP2 = false
	c.TLSConfig = promconfig.TLSConfig{CAFile: o.CAFile, CertFile: o.CertFile, KeyFile: o.KeyFile,
		ServerName: o.ServerName, InsecureSkipVerify: o.InsecureSkipVerify}
	if (o.CertFile == "") != (o.KeyFile == "") {
		return c, usageError{errors.New("--tls.cert-file and --tls.key-file: give both or neither")}
	}
	if o.BasicAuthPasswordFile != "" && o.BasicAuthUsername == "" {
		return c, usageError{errors.New("--basic-auth.password-file needs --basic-auth.username")}
	}
	if o.BasicAuthUsername != "" {
		c.BasicAuth = &promconfig.BasicAuth{Username: o.BasicAuthUsername, PasswordFile: o.BasicAuthPasswordFile}
	}
	if o.BearerTokenFile != "" {
		c.Authorization = &promconfig.Authorization{Type: "Bearer", CredentialsFile: o.BearerTokenFile}
	}
	if err := c.Validate(); err != nil {
		return c, usageError{err}
	}
	return c, nil
}

// agentClient asks one agent's REST API.
type agentClient struct {
	base   string
	client *http.Client
}

func (o *agentClientOptions) client(fs *pflag.FlagSet) (*agentClient, error) {
	cfg, err := o.httpConfig(fs)
	if err != nil {
		return nil, err
	}
	c, err := promconfig.NewClientFromConfig(cfg, "layerprobe")
	if err != nil {
		return nil, usageError{fmt.Errorf("TLS or authentication settings: %w", err)}
	}
	c.Timeout = o.Timeout
	base := strings.TrimRight(o.URL, "/")
	if !strings.HasPrefix(base, "http://") && !strings.HasPrefix(base, "https://") {
		return nil, usageError{fmt.Errorf("--url %q: want http:// or https://", o.URL)}
	}
	return &agentClient{base: base, client: c}, nil
}

// get fetches path (below the base URL) and returns the body of a 200
// answer; any other status is an error with the agent's message.
func (a *agentClient) get(ctx context.Context, path string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.base+path, nil)
	if err != nil {
		return nil, usageError{fmt.Errorf("--url %q: %w", a.base, err)}
	}
	resp, err := a.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("ask the agent at %s: %w", a.base, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, fmt.Errorf("read the agent's answer to %s: %w", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		if resp.StatusCode == http.StatusUnauthorized {
			return nil, fmt.Errorf("agent at %s answered %s to %s: give its credentials (--basic-auth.username and --basic-auth.password-file, --bearer-token-file, or --http.config.file)", a.base, resp.Status, path)
		}
		var e api.ErrorResponse
		if json.Unmarshal(body, &e) == nil && e.Error.Message != "" {
			return nil, fmt.Errorf("agent at %s answered %s to %s: %s", a.base, resp.Status, path, e.Error.Message)
		}
		return nil, fmt.Errorf("agent at %s answered %s to %s", a.base, resp.Status, path)
	}
	return body, nil
}

// getJSON fetches path and decodes its JSON into v.
func (a *agentClient) getJSON(ctx context.Context, path string, v any) error {
	body, err := a.get(ctx, path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("decode the agent's answer to %s: %w", path, err)
	}
	return nil
}
