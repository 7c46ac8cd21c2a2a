package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/layerprobe/layerprobe/api"
	"github.com/layerprobe/layerprobe/internal/report"
)

func newOverheadCommand(g *globalOptions) *cobra.Command {
	var url, output string
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "overhead",
		Short: "Print the latest overhead table from a running agent",
		Long: `Ask a running layerprobe agent for its latest overheads (GET /api/v1/overhead) and
print them as a table, or as the API's JSON with --output json.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output != "table" && output != "json" {
				return usageError{fmt.Errorf("--output %q: want table or json", output)}
			}
			return runOverhead(cmd.Context(), url, output, timeout, cmd.OutOrStdout())
		},
	}
	cmd.Flags().StringVar(&url, "url", "http://127.0.0.1:9811", "base URL of the agent")
	cmd.Flags().StringVarP(&output, "output", "o", "table", "output format: table or json")
	cmd.Flags().DurationVar(&timeout, "timeout", 10*time.Second, "request timeout")
	return cmd
}

func runOverhead(ctx context.Context, base, output string, timeout time.Duration, out io.Writer) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	u := strings.TrimRight(base, "/") + "/api/v1/overhead"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return usageError{fmt.Errorf("--url %q: %w", base, err)}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("ask the agent at %s: %w", base, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return fmt.Errorf("read the agent's answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		var e api.ErrorResponse
		if json.Unmarshal(body, &e) == nil && e.Error.Message != "" {
			return fmt.Errorf("agent at %s answered %s: %s", base, resp.Status, e.Error.Message)
		}
		return fmt.Errorf("agent at %s answered %s", base, resp.Status)
	}
	if output == "json" {
		_, err := out.Write(body)
		return err
	}
	var o api.OverheadResponse
	if err := json.Unmarshal(body, &o); err != nil {
		return fmt.Errorf("decode the agent's answer: %w", err)
	}
	run := report.Run{SchemaVersion: report.SchemaVersion, Mode: "steady", Confidence: o.Confidence,
		StartedAt: o.GeneratedAt, FinishedAt: o.GeneratedAt}
	for _, e := range o.Engines {
		re := report.Engine{Name: e.Engine, Driver: e.Driver, BackingFS: e.BackingFS, Results: e.Results}
		if e.LastSuccess == nil {
			re.Warnings = append(re.Warnings, "no successful cycle yet")
		} else {
			re.Warnings = append(re.Warnings, fmt.Sprintf("last successful cycle %s; estimates over the last %d rounds",
				e.LastSuccess.Format(time.RFC3339), e.Window))
		}
		run.Engines = append(run.Engines, re)
	}
	return report.WriteTable(out, run)
}
