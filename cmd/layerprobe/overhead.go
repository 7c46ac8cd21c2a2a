package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/layerprobe/layerprobe/api"
	"github.com/layerprobe/layerprobe/internal/report"
)

// overheadCycles is how many recent cycles `layerprobe overhead` asks for
// to find each engine's last cycle of each mode.
const overheadCycles = 50

func newOverheadCommand(_ *globalOptions) *cobra.Command {
	var o agentClientOptions
	var output string
	cmd := &cobra.Command{
		Use:   "overhead",
		Short: "Print the latest overhead table from a running agent",
		Long: `Ask a running layerprobe agent for its latest overheads (GET /api/v1/overhead) and
print them as a table, with what the agent says of each engine (GET /api/v1/engines)
and its last steady and cold cycles (GET /api/v1/cycles); or the API's JSON with
--output json.

An agent run with --web.config.file (TLS, client certificates, basic auth) is read
with the same settings a Prometheus server scrapes it with: the --tls.* and
--basic-auth.* flags, --bearer-token-file, or a Prometheus HTTP client
configuration file with --http.config.file, e.g.

  tls_config:
    ca_file: /etc/layerprobe/ca.pem
  basic_auth:
    username: prometheus
    password_file: /etc/layerprobe/password`,
		Example: `  layerprobe overhead
  layerprobe overhead --url https://node1:9811 --tls.ca-file ca.pem \
    --basic-auth.username prometheus --basic-auth.password-file password
  layerprobe overhead --url https://node1:9811 --http.config.file client.yml -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output != "table" && output != "json" {
				return usageError{fmt.Errorf("--output %q: want table or json", output)}
			}
			c, err := o.client(cmd.Flags())
			if err != nil {
				return err
			}
			return runOverhead(cmd.Context(), c, output, cmd.OutOrStdout())
		},
	}
	o.addFlags(cmd.Flags())
	cmd.Flags().StringVarP(&output, "output", "o", "table", "output format: table or json")
	return cmd
}

func runOverhead(ctx context.Context, c *agentClient, output string, out io.Writer) error {
	if output == "json" {
		body, err := c.get(ctx, "/api/v1/overhead")
		if err != nil {
			return err
		}
		_, err = out.Write(body)
		return err
	}
	a := report.Agent{URL: c.base}
	if err := c.getJSON(ctx, "/api/v1/overhead", &a.Overhead); err != nil {
		return err
	}
	var engines api.EnginesResponse
	if err := c.getJSON(ctx, "/api/v1/engines", &engines); err != nil {
		return err
	}
	a.Engines = engines.Engines
	var cycles api.CyclesResponse
	if err := c.getJSON(ctx, fmt.Sprintf("/api/v1/cycles?limit=%d", overheadCycles), &cycles); err != nil {
		return err
	}
	a.Cycles = cycles.Cycles
	return report.WriteAgentTable(out, a)
}
