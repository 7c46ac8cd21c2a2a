// Recording rules for the fleet views: one Prometheus (or Thanos, Mimir)
// over hundreds to thousands of agents. Every aggregation keeps the cluster
// label and job, so the rules give the same answers in one Prometheus (the
// label is then absent, or added as an external label on the way to remote
// storage) and in a ruler that sees several clusters. They run in their own
// group at fleetRulesInterval: the agents' figures change once a cycle.
local promql = import '../lib/promql.libsonnet';

{
  prometheusRules+:: {
    local c = $._config,
    local s(metric, matchers=[]) = promql.series(metric, [c.layerprobeSelector] + matchers),
    local cl = c.clusterLabel,
    // The host of an instance: its name without the port, the key that
    // joins node_exporter's series to layerprobe's.
    local withHost(expr) = 'label_replace(%s, "host", "$1", "instance", "%s")' % [expr, c.hostFromInstanceRegex],
    // node_exporter's kernel under each name of its host: the instance
    // without its port (compose, systemd: the agent's instance names the
    // host the same way) and node_uname_info's nodename (uname -n: the
    // Kubernetes node name, which the chart makes the agent's instance,
    // while kube-prometheus-stack keeps node-exporter's instance as
    // IP:9100). The nodename side falls back to the instance where the
    // label is empty, so it adds no host-less series. Where both name one
    // host, the instance wins (`or`): it is the scrape's own address, the
    // nodename only what the host calls itself.
    local unameSeries = promql.series('node_uname_info', [c.nodeExporterSelector]),
    local kernelsBy(expr) = 'max by (%s, host, release) (%s)' % [cl, expr],
    local hostKernels =
      if c.nodeExporterNodenameLabel == '' then kernelsBy(withHost(unameSeries))
      else '%s\n  or on (%s, host)\n%s' % [
        kernelsBy(withHost(unameSeries)),
        cl,
        kernelsBy('label_replace(%s, "host", "$1", "%s", "(.+)")' % [withHost(unameSeries), c.nodeExporterNodenameLabel]),
      ],
    // The headline overheads per host: fsync p99 (the cost of durable
    // writes), random 4 KiB write IOPS and sequential write bandwidth (the
    // cost of the container layer's copy-on-write for data), steady
    // results of the container, volume and bind targets: 9 of an engine's
    // 44 overhead ratios. Recorded once (headline below); every other
    // fleet rule reads that instead of the raw series.
    local headline = [
      { workload: 'fsync', metric: 'fsync_p99' },
      { workload: 'randwrite', metric: 'iops' },
      { workload: 'seqwrite', metric: 'bandwidth' },
    ],
    local headlineSeries = 'instance_engine_target:layerprobe_overhead_ratio:headline',
    // One series per agent, value 1: the agents scraped now.
    local agents = 'max by (%s, job, instance) (%s)' % [cl, s('layerprobe_build_info')],
    local fsyncOverhead = s('layerprobe_overhead_ratio', ['mode=~"steady|"', 'target!="host"', 'workload="fsync"', 'metric="fsync_p99"']),
    local quantiles = ['0.5', '0.9', '0.99'],

    groups+: [
      {
        // What the fleet dashboard's overhead rows read. The kernel join
        // and the distributions read the headline series (9 per engine),
        // never the raw ones: at 1000 hosts that is 9k series instead of 44k
        // overhead ratios, and a join of 9k instead of a label_replace
        // over the raw series.
        name: 'layerprobe.fleet',
        interval: c.fleetRulesInterval,
        rules: [
          // The kernel of every host node_exporter reports, keyed by host
          // (instance without port, and nodename); value 1. At most one
          // series per host, or the join below would fail for every
          // agent: a name claimed by two kernels (two machines that kept
          // the hostname localhost) is left out, and its agent reads
          // "unknown".
          {
            record: 'host:layerprobe_node_uname:info',
            expr: |||
              (
                %(k)s
              )
                unless on (%(cl)s, host)
              count by (%(cl)s, host) (
                %(k)s
              ) > 1
            ||| % { cl: cl, k: std.strReplace(hostKernels, '\n', '\n  ') },
          },
          // The headline steady overheads of every engine, with every
          // label of the raw series: one plain selector per figure (an
          // `or` of the three costs more than the three). The rules set
          // the workload and metric they select as labels, which changes
          // nothing in the series and gives each rule its own label set
          // (promtool's lint).
        ] + [
          {
            record: headlineSeries,
            expr: |||
              %s
            ||| % s('layerprobe_overhead_ratio', ['mode=~"steady|"', 'target!="host"', 'workload="%s"' % h.workload, 'metric="%s"' % h.metric]),
            labels: h,
          }
          for h in headline
        ] + [
          // Every agent's host and kernel: one series per agent (about 1k
          // at 1000 hosts) with the host name and node_exporter's
          // release, "unknown" where no node_uname_info matches the host.
          // The join below reads this instead of relabelling and joining
          // the 9k headline series twice.
          {
            record: 'instance:layerprobe_release:info',
            expr: |||
              max by (%(cl)s, job, instance, host, release) (
                %(agents)s
                  * on (%(cl)s, host) group_left (release)
                host:layerprobe_node_uname:info
              )
              or on (%(cl)s, job, instance)
                label_replace(%(agents)s, "release", "unknown", "", "")
            ||| % { cl: cl, agents: withHost(agents) },
          },
          // The headline with the host's kernel (release) and host name.
          {
            record: 'instance_engine_target:layerprobe_overhead_ratio:kernel',
            expr: |||
              %(h)s
                * on (%(cl)s, job, instance) group_left (host, release)
              instance:layerprobe_release:info
            ||| % { cl: cl, h: headlineSeries },
          },
        ],
      },
      {
        // The distributions per storage driver and per kernel, from the
        // headline series the group above records, in groups of their own:
        // each aggregation reads the 9 headline series of every engine
        // (about 9k at 1000 hosts, some 40 ms on two vCPUs), and a group's
        // rules run one after another while Prometheus runs groups side by
        // side. They read the headline as recorded at the fleet group's
        // last evaluation, at most fleetRulesInterval old, for figures that
        // change once a cycle.
        name: 'layerprobe.fleet.drivers',
        interval: c.fleetRulesInterval,
        rules: [
          // How the fleet's headline overheads are spread per storage
          // driver and target: median, 90th and 99th percentile over the
          // engines.
          {
            record: 'job_driver_target:layerprobe_overhead_ratio:quantile',
            expr: |||
              quantile by (%s, job, driver, target, workload, metric, mode) (%s, %s)
            ||| % [cl, q, headlineSeries],
            labels: { quantile: q },
          }
          for q in quantiles
        ] + [
          {
            record: 'job_driver_target:layerprobe_overhead_ratio:max',
            expr: |||
              max by (%s, job, driver, target, workload, metric, mode) (%s)
            ||| % [cl, headlineSeries],
          },
          // Engines behind each driver's distribution.
          {
            record: 'job_driver_target:layerprobe_overhead_ratio:count',
            expr: |||
              count by (%s, job, driver, target, workload, metric, mode) (%s)
            ||| % [cl, headlineSeries],
          },
        ],
      },
      {
        name: 'layerprobe.fleet.kernels',
        interval: c.fleetRulesInterval,
        rules: [
          // The same per kernel release and driver ("unknown": hosts
          // without node_exporter).
          {
            record: 'job_release_driver_target:layerprobe_overhead_ratio:quantile',
            expr: |||
              quantile by (%s, job, release, driver, target, workload, metric) (%s, instance_engine_target:layerprobe_overhead_ratio:kernel)
            ||| % [cl, q],
            labels: { quantile: q },
          }
          for q in quantiles
        ] + [
          {
            record: 'job_release_driver_target:layerprobe_overhead_ratio:count',
            expr: |||
              count by (%s, job, release, driver, target, workload, metric) (instance_engine_target:layerprobe_overhead_ratio:kernel)
            ||| % cl,
          },
        ],
      },
      {
        // Regressions, agents that stopped reporting and databases in
        // layers: a few series per engine each, independent of the
        // overheads, in a group of their own so that each group's
        // evaluation stays short.
        name: 'layerprobe.fleet.health',
        interval: c.fleetRulesInterval,
        rules: [
          // How far each fsync p99 overhead moved in a day: one sample
          // per series now and one a day ago (offset, not a range). It
          // reads the raw series, whose history reaches back before these
          // rules were loaded (the headline's would not, for a day).
          {
            record: 'instance_engine_target:layerprobe_fsync_overhead:delta1d',
            expr: |||
              %s
                -
              %s offset 1d
            ||| % [fsyncOverhead, fsyncOverhead],
          },
          // Regressions: the targets whose detector says regressed now
          // (only those, so that a day of them is cheap to read), whether
          // one was flagged at any time in the last day, and the count per
          // fleet and driver.
          {
            record: 'instance_engine_target:layerprobe_fsync_regression:flagged',
            expr: |||
              %s == 1
            ||| % s('layerprobe_fsync_regression'),
          },
          {
            record: 'instance_engine_target:layerprobe_fsync_regression:max1d',
            expr: |||
              max_over_time(instance_engine_target:layerprobe_fsync_regression:flagged[1d])
            |||,
          },
          {
            record: 'job_driver:layerprobe_fsync_regression:count',
            expr: |||
              count by (%s, job, driver) (instance_engine_target:layerprobe_fsync_regression:flagged)
            ||| % cl,
          },
          // Agents that stopped reporting: seen in the last day (one series
          // per agent, recorded every fleetRulesInterval: a day of it is
          // 288 samples per agent), not now. An agent taken out of the
          // scrape configuration on purpose is listed for a day, then
          // forgotten.
          {
            record: 'instance:layerprobe_agent:up',
            expr: |||
              %s
            ||| % agents,
          },
          {
            record: 'instance:layerprobe_agent:stopped_reporting',
            expr: |||
              max_over_time(instance:layerprobe_agent:up[1d])
                unless on (%s, job, instance)
              instance:layerprobe_agent:up
            ||| % cl,
          },
          // Where the writable-layer databases are: containers per
          // database kind (top containers only; layerprobe_databases_in_layer
          // counts all) and all of them per fleet.
          {
            record: 'job_database:layerprobe_container_database_in_layer:count',
            expr: |||
              count by (%s, job, database) (%s)
            ||| % [cl, s('layerprobe_container_database_in_layer')],
          },
          {
            record: 'job:layerprobe_databases_in_layer:sum',
            expr: |||
              sum by (%s, job) (%s)
            ||| % [cl, s('layerprobe_databases_in_layer')],
          },
        ],
      },
    ],
  },
}
