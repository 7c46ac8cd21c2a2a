// Recording rules. They keep every label of their input, so they work the
// same in a single Prometheus and across clusters.
local promql = import '../lib/promql.libsonnet';

{
  prometheusRules+:: {
    local c = $._config,
    local s(metric, matchers=[]) = promql.series(metric, [c.layerprobeSelector] + matchers),
    // The increase of an hourly record of a counter since the hourly
    // group's previous evaluation: the difference of its last two samples
    // where it did not fall, the last sample where it fell (a reset),
    // nothing without a previous one. The window is the group's interval
    // (hourlyRulesInterval), which holds one sample of the record.
    local hourlyIncrease(rec) = |||
        (last_over_time(%(r)s[%(i)s]) - last_over_time(%(r)s[%(i)s] offset %(i)s)) >= 0
          or
        (last_over_time(%(r)s[%(i)s]) and last_over_time(%(r)s[%(i)s] offset %(i)s))
    ||| % { r: rec, i: c.hourlyRulesInterval },
    groups+: [
      {
        name: 'layerprobe.recording',
        rules: [
          // Share of the daily write budget used, 0 to 1 (absent when the
          // budget is unlimited).
          {
            record: 'engine:layerprobe_budget_used_bytes:ratio',
            expr: |||
              %s / %s
            ||| % [s('layerprobe_budget_used_bytes'), s('layerprobe_daily_budget_bytes')],
          },
          // Share of the cycles finished in the last day that succeeded
          // (absent when none finished), steady and cold cycles together,
          // from the hourly sums of layerprobe.recording.hourly (25 samples
          // per result for the day; first an hour after the rules are
          // loaded). Here, not in the hourly group: a series recorded once
          // an hour would be older than the query lookback (5m) most of the
          // time, and instant queries would find nothing.
          {
            record: 'engine:layerprobe_cycles:ok_ratio1d',
            expr: |||
              sum without (result) (increase(%s[1d]))
                /
              (sum without (result) (increase(%s[1d])) > 0)
            ||| % [s('engine_result:layerprobe_cycles_total:sum', ['result="ok"']), s('engine_result:layerprobe_cycles_total:sum')],
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
      {
        // What rules over days read, recorded once an hour. The day's
        // share of successful cycles read from the raw counters,
        // increase(...[1d]), touches every scraped sample of a day (about
        // 1440 per counter at a 1m scrape, 8 counters per engine: 14M
        // samples per evaluation at 1000 hosts). The counters' sum per
        // result, recorded once an hour, holds the same count in 25
        // samples, since a counter keeps every cycle however rarely it is
        // read; its increase over the day is the day's cycles (an agent's
        // restart resets all its counters at once, which increase()
        // handles). Both increases are taken over samples of the same
        // timestamps, so their ratio is exact. These series are read
        // over ranges only: an instant query finds them for 5 minutes an
        // hour.
        name: 'layerprobe.recording.hourly',
        interval: c.hourlyRulesInterval,
        rules: [
          {
            record: 'engine_result:layerprobe_cycles_total:sum',
            expr: |||
              sum without (mode) (%s)
            ||| % s('layerprobe_cycles_total'),
          },
          // The counters the fleet dashboard counts over its whole range,
          // once an hour (one sample per counter): the bytes the
          // measurement jobs wrote per engine, over targets, and the
          // guardrails' skips per engine and reason. The dashboard takes
          // increase() of these over $__range, 720 samples per series for
          // 30 days instead of every scraped one; as above, an agent's
          // restart resets all its counters at once, so each sum is a
          // counter too.
          {
            record: 'engine:layerprobe_written_bytes_total:sum',
            expr: |||
              sum without (target) (%s)
            ||| % s('layerprobe_written_bytes_total'),
          },
          {
            record: 'engine_reason:layerprobe_cycle_skips_total:sum',
            expr: |||
              sum without () (%s)
            ||| % s('layerprobe_cycle_skips_total'),
          },
          // The same skips per engine, over reasons: the fleet's health
          // table counts them per engine over its range, and at 1000 hosts
          // over 30 days the six reasons' series took it to 1.5-1.8 s.
          {
            record: 'engine:layerprobe_cycle_skips_total:sum',
            expr: |||
              sum without (reason) (%s)
            ||| % s('layerprobe_cycle_skips_total'),
          },
          // What the fleet wrote and skipped in each hour, summed over its
          // hosts, for the fleet panels that show the whole fleet over
          // their range: a handful of series instead of one per host (at
          // 1000 hosts over 30 days, increase() of every host's record
          // took 1.4-2.8 s). The hour's figure is the difference between
          // an engine's last two hourly records, exact (no extrapolation),
          // and last_over_time() finds them whatever the offset of this
          // group's evaluation. After a reset (the agent restarted) it is
          // the counter since the restart. An engine's first hourly record
          // has no previous one and adds nothing: what it counted before
          // that hour is not in these records (it is in the per-engine
          // records above).
          {
            record: 'job_engine_reason:layerprobe_cycle_skips:increase1h',
            expr: |||
              sum by (%s, job, engine, reason) (
              %s)
            ||| % [c.clusterLabel, hourlyIncrease(s('engine_reason:layerprobe_cycle_skips_total:sum'))],
          },
          // The bytes the measurement jobs wrote in the hour: the fleet's
          // total, and the most any one engine wrote.
          {
            record: 'job_engine:layerprobe_written_bytes:sum_increase1h',
            expr: |||
              sum by (%s, job, engine) (
              %s)
            ||| % [c.clusterLabel, hourlyIncrease(s('engine:layerprobe_written_bytes_total:sum'))],
          },
          {
            record: 'job_engine:layerprobe_written_bytes:max_increase1h',
            expr: |||
              max by (%s, job, engine) (
              %s)
            ||| % [c.clusterLabel, hourlyIncrease(s('engine:layerprobe_written_bytes_total:sum'))],
          },
          // The last successful steady cycle in the hour, for
          // LayerprobeAgentStale's agents that have gone away: its 7 days
          // then read 168 samples per engine instead of every scraped one.
          {
            record: 'engine:layerprobe_last_success_timestamp_seconds:max1h',
            expr: |||
              max without (mode) (max_over_time(%s[1h]))
            ||| % s('layerprobe_last_success_timestamp_seconds', ['mode=~"steady|"']),
          },
        ],
      },
    ],
  },

  // Raw target/host ratios of the last cycle's figures, computed by
  // Prometheus from the raw series. Not in the default rules: nothing on the
  // dashboards or in the alerts reads them, and at 1000 hosts they divide
  // about 120k raw series in every evaluation (160-270 ms per group on two
  // vCPUs, docs/fleet.md). deploy/prometheus/layerprobe-raw-ratio-rules.yml
  // holds them for whoever wants the raw figures the agent does not pair;
  // they need agent.metrics_detail: true (the lean default exposes each
  // workload's headline raw figure only).
  prometheusRawRatioRules+:: {
    local c = $._config,
    local s(metric, matchers=[]) = promql.series(metric, [c.layerprobeSelector] + matchers),
    groups+: [
      // 1 = same as the host; for IOPS and
      // bandwidth below 1 is slower, for latency above 1 is slower. The
      // agent's own layerprobe_overhead_ratio is the better statistic
      // (paired per-round ratios with a confidence interval); these exist
      // for raw figures the agent does not pair (op="read",
      // percentile="99.9"). The match includes `mode`: cold results (fsync,
      // host and container only) are divided by the cold host figure,
      // steady ones by the steady host figure.
      //
      // Every raw figure of every engine is divided (about 120 series per
      // engine), so the division is split in groups of about 20 series per
      // engine each: latency per percentile, the last group taking every
      // other percentile, so that the groups together cover all. A record
      // name may have one rule per label set (promtool's lint): the split
      // rules set the percentile they select as their label, which
      // changes nothing in the series they record.
      {
        name: 'layerprobe.ratio_to_host.%s' % g.name,
        rules: [
          {
            record: 'target:%s:ratio_to_host' % g.metric,
            expr: |||
              %s
                / ignoring (target) group_left ()
              %s
            ||| % [s(g.metric, ['target!="host"'] + g.matchers), s(g.metric, ['target="host"'] + g.matchers)],
          } + (if std.objectHas(g, 'percentile') then { labels: { percentile: g.percentile } } else {}),
        ],
      }
      for g in [
        { name: 'iops', metric: 'layerprobe_iops', matchers: [] },
        { name: 'bandwidth', metric: 'layerprobe_bandwidth_bytes_per_second', matchers: [] },
        { name: 'latency_p50', metric: 'layerprobe_latency_seconds', matchers: ['percentile="50"'], percentile: '50' },
        { name: 'latency_p99', metric: 'layerprobe_latency_seconds', matchers: ['percentile="99"'], percentile: '99' },
        { name: 'latency_other', metric: 'layerprobe_latency_seconds', matchers: ['percentile!~"50|99"'] },
      ]
    ],
  },
}
