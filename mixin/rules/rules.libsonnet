// Recording rules. They keep every label of their input, so they work the
// same in a single Prometheus and across clusters.
local promql = import '../lib/promql.libsonnet';

{
  prometheusRules+:: {
    local c = $._config,
    local s(metric, matchers=[]) = promql.series(metric, [c.layerprobeSelector] + matchers),
    groups+: [
      {
        name: 'layerprobe.recording',
        rules: [
          // Raw target/host ratios of the last cycle's figures, computed by
          // Prometheus from the raw series. 1 = same as the host; for IOPS
          // and bandwidth below 1 is slower, for latency above 1 is slower.
          // The agent's own layerprobe_overhead_ratio is the better
          // statistic (paired per-round ratios with a confidence interval);
          // these exist for raw figures the agent does not pair (op="read",
          // percentile="99.9"). The match includes `mode`: cold results
          // (fsync, host and container only) are divided by the cold host
          // figure, steady ones by the steady host figure.
          {
            record: 'target:%s:ratio_to_host' % metric,
            expr: |||
              %s
                / ignoring (target) group_left ()
              %s
            ||| % [s(metric, ['target!="host"']), s(metric, ['target="host"'])],
          }
          for metric in ['layerprobe_iops', 'layerprobe_bandwidth_bytes_per_second', 'layerprobe_latency_seconds']
        ] + [
          // Share of the daily write budget used, 0 to 1 (absent when the
          // budget is unlimited).
          {
            record: 'engine:layerprobe_budget_used_bytes:ratio',
            expr: |||
              %s / %s
            ||| % [s('layerprobe_budget_used_bytes'), s('layerprobe_daily_budget_bytes')],
          },
          // Share of the cycles finished in the last day that succeeded
          // (absent when none finished), steady and cold cycles together.
          {
            record: 'engine:layerprobe_cycles:ok_ratio1d',
            expr: |||
              sum without (result, mode) (increase(%s[1d]))
                /
              (sum without (result, mode) (increase(%s[1d])) > 0)
            ||| % [s('layerprobe_cycles_total', ['result="ok"']), s('layerprobe_cycles_total')],
          },
          // Bytes per second the measurement jobs wrote, per engine,
          // averaged over an hour: the load the agent puts on the host.
          {
            record: 'engine:layerprobe_written_bytes:rate1h',
            expr: |||
              sum without (target) (rate(%s[1h]))
            ||| % s('layerprobe_written_bytes_total'),
          },
        ],
      },
    ],
  },
}
