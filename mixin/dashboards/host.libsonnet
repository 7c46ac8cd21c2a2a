// The layerprobe / Host detail dashboard (layerprobe-host.json). Panel expressions use
// %(sel)s for the cluster, job and instance matchers (lib/grafana.libsonnet).
local g = import '../lib/grafana.libsonnet';

function(c)
  local q = g.query(c);
  g.dashboard(
    c,
    uid="layerprobe-host",
    title="layerprobe / Host detail",
    description="One Docker host: overhead of the container writable layer, bind mount and named volume versus the host per workload with its 95% interval, the raw IOPS, bandwidth and latency percentiles behind it, cycle health, guardrail skips, the write budget, and the cold paths of a freshly started container (cold fsync overhead, copy-up latency and cost, reflink).",
    from="now-2d",
    variables=g.variable.agent(c, multiInstance=false) + [
      g.variable.query('target', 'Target', 'layerprobe_overhead_ratio', [g.agentMatchers(c), 'engine=~"$engine"', 'mode=~"steady|"'], 'target'),
      // From the overheads: at the lean default no single raw family has every workload.
      g.variable.query('workload', 'Workload', 'layerprobe_overhead_ratio', [g.agentMatchers(c), 'engine=~"$engine"', 'mode=~"steady|"'], 'workload'),
    ],
    panels=[
      g.row(1, "Cycle health", y=0),
      g.panel.stat + {
        id: 2,
        title: "Last successful cycle",
        description: "How long ago the last successful steady-state cycle of each engine ended. Every steady figure on this dashboard is that old: the agent publishes results once per cycle (agent.interval, 6h by default). Red above 15h (2.5 intervals). Cold cycles are in the Cold paths row.",
        gridPos: g.pos(x=0, y=1, w=4, h=4),
        fieldConfig+: {
          defaults+: {
            unit: "s",
            thresholds: {
              mode: "absolute",
              steps: [{"color": "green", "value": null}, {"color": "red", "value": 54000}],
            },
            color: {
              mode: "thresholds",
            },
          },
        },
        options+: {
          colorMode: "background",
          textMode: "auto",
        },
        targets: [
          g.target(q("max by (engine) (time() - layerprobe_last_success_timestamp_seconds{%(sel)s, engine=~\"$engine\", mode=~\"steady|\"})"), "{{engine}}", instant=true),
        ],
      },
      g.panel.stat + {
        id: 3,
        title: "Last cycle duration",
        description: "How long the last finished steady-state cycle of each engine took.",
        gridPos: g.pos(x=4, y=1, w=4, h=4),
        fieldConfig+: {
          defaults+: {
            unit: "s",
          },
        },
        options+: {
          colorMode: "value",
          textMode: "auto",
        },
        targets: [
          g.target(q("max by (engine) (layerprobe_cycle_duration_seconds{%(sel)s, engine=~\"$engine\", mode=~\"steady|\"})"), "{{engine}}", instant=true),
        ],
      },
      g.panel.stat + {
        id: 4,
        title: "Confirmed fsync regressions",
        description: "Targets whose fsync regression detector currently says regressed (layerprobe_fsync_regression == 1).",
        gridPos: g.pos(x=8, y=1, w=4, h=4),
        fieldConfig+: {
          defaults+: {
            unit: "short",
            thresholds: {
              mode: "absolute",
              steps: [{"color": "green", "value": null}, {"color": "red", "value": 1}],
            },
            color: {
              mode: "thresholds",
            },
          },
        },
        options+: {
          colorMode: "background",
          textMode: "auto",
        },
        targets: [
          g.target(q("count(layerprobe_fsync_regression{%(sel)s, engine=~\"$engine\"} == 1) or vector(0)"), "__auto", instant=true),
        ],
      },
      g.panel.stat + {
        id: 5,
        title: "Daily write budget used",
        description: "Bytes written in the last 24 hours as a share of agent.daily_byte_budget; at 100% cycles are skipped. No data when the budget is unlimited (0).",
        gridPos: g.pos(x=12, y=1, w=4, h=4),
        fieldConfig+: {
          defaults+: {
            unit: "percentunit",
            thresholds: {
              mode: "absolute",
              steps: [
                {
                  color: "green",
                  value: null,
                },
                {
                  color: "orange",
                  value: 0.8,
                },
                {
                  color: "red",
                  value: 1,
                },
              ],
            },
            color: {
              mode: "thresholds",
            },
          },
        },
        options+: {
          colorMode: "background",
          textMode: "auto",
        },
        targets: [
          g.target(q("max by (engine) (layerprobe_budget_used_bytes{%(sel)s, engine=~\"$engine\"} / layerprobe_daily_budget_bytes{%(sel)s, engine=~\"$engine\"})"), "{{engine}}", instant=true),
        ],
      },
      g.panel.table + {
        id: 6,
        title: "Engine and agent",
        description: "The engine's storage driver, the file system under its data root, its version, and the fio version both arms of every comparison run (layerprobe_engine_info).",
        gridPos: g.pos(x=16, y=1, w=8, h=4),
        fieldConfig+: {
          defaults+: {
            unit: "none",
          },
          overrides: [],
        },
        transformations: [
          {
            id: "organize",
            options: {
              excludeByName: {
                Time: true,
                __name__: true,
                Value: true,
                job: true,
                instance: true,
              },
              renameByName: {
                backing_fs: "backing file system",
                engine_version: "engine version",
                data_root: "data root",
                fio_version: "fio",
              },
              indexByName: {},
            },
          },
        ],
        targets: [
          g.target(q("layerprobe_engine_info{%(sel)s, engine=~\"$engine\"}"), "__auto", instant=true, format="table"),
        ],
      },
      g.panel.bargauge + {
        id: 7,
        title: "Cycles in the time range by result",
        description: "Steady-state cycles finished in the selected time range: ok, failed, skipped (by a guardrail) or interrupted (agent stopped during a cycle). Cold cycles are in the Cold paths row.",
        gridPos: g.pos(x=0, y=5, w=8, h=7),
        fieldConfig+: {
          defaults+: {
            unit: "short",
            thresholds+: {
              steps: [{"color": "green", "value": null}],
            },
          },
        },
        targets: [
          g.target(q("sum by (result) (increase(layerprobe_cycles_total{%(sel)s, engine=~\"$engine\", mode=~\"steady|\"}[$__range]))"), "{{result}}", instant=true),
        ],
      },
      g.panel.bargauge + {
        id: 8,
        title: "Skipped cycles by reason",
        description: "Cycles a guardrail skipped in the selected time range, by reason.",
        gridPos: g.pos(x=8, y=5, w=8, h=7),
        fieldConfig+: {
          defaults+: {
            unit: "short",
            thresholds+: {
              steps: [
                {
                  color: "green",
                  value: null,
                },
                {
                  color: "orange",
                  value: 0.5,
                },
              ],
            },
          },
        },
        targets: [
          g.target(q("sum by (reason) (increase(layerprobe_cycle_skips_total{%(sel)s, engine=~\"$engine\"}[$__range]))"), "{{reason}}", instant=true),
        ],
      },
      g.panel.timeseries + {
        id: 9,
        title: "Cycle duration",
        description: "Duration of the last finished steady-state cycle, per engine.",
        gridPos: g.pos(x=16, y=5, w=8, h=7),
        fieldConfig+: {
          defaults+: {
            unit: "s",
          },
          overrides: [],
        },
        options+: {
          legend+: {
            calcs: ["lastNotNull"],
          },
        },
        targets: [
          g.target(q("layerprobe_cycle_duration_seconds{%(sel)s, engine=~\"$engine\", mode=~\"steady|\"}"), "{{engine}}"),
        ],
      },
      g.row(10, "Overhead versus the host (paired estimate, 95% interval)", y=12),
      g.panel.timeseries + {
        id: 11,
        title: "fsync p99 overhead per target with its 95% interval",
        description: "Paired overhead (Hodges-Lehmann estimate) of the 99th percentile fsync latency of each target versus the host directory, with the 95% confidence interval as a band. 0.2 = 20% slower than the host, negative = faster. bind is the host directory itself and shows the noise level.",
        gridPos: g.pos(x=0, y=13, w=12, h=9),
        fieldConfig+: {
          defaults+: {
            unit: "percentunit",
          },
          overrides: [
            {
              matcher: {
                id: "byName",
                options: "container 95% high",
              },
              properties: [
                {
                  id: "custom.fillBelowTo",
                  value: "container 95% low",
                },
                {
                  id: "custom.fillOpacity",
                  value: 15,
                },
                {
                  id: "custom.lineWidth",
                  value: 0,
                },
                {
                  id: "custom.hideFrom",
                  value: {
                    legend: true,
                    tooltip: false,
                    viz: false,
                  },
                },
              ],
            },
            {
              matcher: {
                id: "byName",
                options: "container 95% low",
              },
              properties: [
                {
                  id: "custom.lineWidth",
                  value: 0,
                },
                {
                  id: "custom.hideFrom",
                  value: {
                    legend: true,
                    tooltip: false,
                    viz: false,
                  },
                },
              ],
            },
            {
              matcher: {
                id: "byName",
                options: "volume 95% high",
              },
              properties: [
                {
                  id: "custom.fillBelowTo",
                  value: "volume 95% low",
                },
                {
                  id: "custom.fillOpacity",
                  value: 15,
                },
                {
                  id: "custom.lineWidth",
                  value: 0,
                },
                {
                  id: "custom.hideFrom",
                  value: {
                    legend: true,
                    tooltip: false,
                    viz: false,
                  },
                },
              ],
            },
            {
              matcher: {
                id: "byName",
                options: "volume 95% low",
              },
              properties: [
                {
                  id: "custom.lineWidth",
                  value: 0,
                },
                {
                  id: "custom.hideFrom",
                  value: {
                    legend: true,
                    tooltip: false,
                    viz: false,
                  },
                },
              ],
            },
            {
              matcher: {
                id: "byName",
                options: "bind 95% high",
              },
              properties: [
                {
                  id: "custom.fillBelowTo",
                  value: "bind 95% low",
                },
                {
                  id: "custom.fillOpacity",
                  value: 15,
                },
                {
                  id: "custom.lineWidth",
                  value: 0,
                },
                {
                  id: "custom.hideFrom",
                  value: {
                    legend: true,
                    tooltip: false,
                    viz: false,
                  },
                },
              ],
            },
            {
              matcher: {
                id: "byName",
                options: "bind 95% low",
              },
              properties: [
                {
                  id: "custom.lineWidth",
                  value: 0,
                },
                {
                  id: "custom.hideFrom",
                  value: {
                    legend: true,
                    tooltip: false,
                    viz: false,
                  },
                },
              ],
            },
          ],
        },
        options+: {
          legend+: {
            calcs: ["lastNotNull", "max"],
          },
        },
        targets: [
          g.target(q("max by (target) (layerprobe_overhead_ratio{%(sel)s, engine=~\"$engine\", mode=~\"steady|\", target=~\"$target\", workload=\"fsync\", metric=\"fsync_p99\"})"), "{{target}}"),
          g.target(q("max by (target) (layerprobe_overhead_ci_low_ratio{%(sel)s, engine=~\"$engine\", mode=~\"steady|\", target=~\"$target\", workload=\"fsync\", metric=\"fsync_p99\"})"), "{{target}} 95% low", refId="B"),
          g.target(q("max by (target) (layerprobe_overhead_ci_high_ratio{%(sel)s, engine=~\"$engine\", mode=~\"steady|\", target=~\"$target\", workload=\"fsync\", metric=\"fsync_p99\"})"), "{{target}} 95% high", refId="C"),
        ],
      },
      g.panel.table + g.needsDetail + {
        id: 12,
        title: "Latest overhead per target, workload and metric",
        description: "The published overhead of every target, workload and metric with its 95% interval. For iops and bandwidth the ratio is 1 - target/host, for latencies target/host - 1: in both cases 0.08 = 8% slower than the host. Without agent.metrics_detail: true only each workload's headline metric.",
        gridPos: g.pos(x=12, y=13, w=12, h=9),
        fieldConfig+: {
          defaults+: {
            unit: "percentunit",
          },
          overrides: [
            {
              matcher: {
                id: "byName",
                options: "overhead",
              },
              properties: [
                {
                  id: "custom.cellOptions",
                  value: {
                    type: "color-text",
                  },
                },
                {
                  id: "thresholds",
                  value: {
                    mode: "absolute",
                    steps: [
                      {
                        color: "green",
                        value: null,
                      },
                      {
                        color: "orange",
                        value: 0.25,
                      },
                      {
                        color: "red",
                        value: 0.5,
                      },
                    ],
                  },
                },
              ],
            },
          ],
        },
        transformations: [
          {
            id: "merge",
            options: {},
          },
          {
            id: "organize",
            options: {
              excludeByName: {
                Time: true,
                __name__: true,
                job: true,
                instance: true,
                driver: true,
              },
              renameByName: {
                workload: "workload",
                "Value #A": "overhead",
                "Value #B": "95% CI low",
                "Value #C": "95% CI high",
              },
              indexByName: {
                engine: 0,
                target: 1,
                workload: 2,
                metric: 3,
                "Value #A": 4,
                "Value #B": 5,
                "Value #C": 6,
              },
            },
          },
        ],
        targets: [
          g.target(q("max without () (layerprobe_overhead_ratio{%(sel)s, engine=~\"$engine\", mode=~\"steady|\", target=~\"$target\", workload=~\"$workload\"})"), "__auto", instant=true, format="table"),
          g.target(q("max without () (layerprobe_overhead_ci_low_ratio{%(sel)s, engine=~\"$engine\", mode=~\"steady|\", target=~\"$target\", workload=~\"$workload\"})"), "__auto", refId="B", instant=true, format="table"),
          g.target(q("max without () (layerprobe_overhead_ci_high_ratio{%(sel)s, engine=~\"$engine\", mode=~\"steady|\", target=~\"$target\", workload=~\"$workload\"})"), "__auto", refId="C", instant=true, format="table"),
        ],
      },
      g.panel.timeseries + g.needsDetail + {
        id: 13,
        title: "Throughput overhead (IOPS, bandwidth)",
        description: "Paired overhead (Hodges-Lehmann estimate) of IOPS and bandwidth per target and workload: 1 - target/host. Without agent.metrics_detail: true only each workload's headline: sequential write bandwidth, random write and small files IOPS.",
        gridPos: g.pos(x=0, y=22, w=12, h=8),
        fieldConfig+: {
          defaults+: {
            unit: "percentunit",
          },
          overrides: [],
        },
        options+: {
          legend+: {
            calcs: ["lastNotNull"],
          },
        },
        targets: [
          g.target(q("layerprobe_overhead_ratio{%(sel)s, engine=~\"$engine\", mode=~\"steady|\", target=~\"$target\", workload=~\"$workload\", metric=~\"iops|bandwidth\"}"), "{{target}} {{workload}} {{metric}}"),
        ],
      },
      g.panel.timeseries + g.needsDetail + {
        id: 14,
        title: "Latency overhead (p50, p99, fsync p99)",
        description: "Paired overhead (Hodges-Lehmann estimate) of the latency percentiles per target and workload: target/host - 1. Without agent.metrics_detail: true only the fsync workload's fsync p99, its headline.",
        gridPos: g.pos(x=12, y=22, w=12, h=8),
        fieldConfig+: {
          defaults+: {
            unit: "percentunit",
          },
          overrides: [],
        },
        options+: {
          legend+: {
            calcs: ["lastNotNull"],
          },
        },
        targets: [
          g.target(q("layerprobe_overhead_ratio{%(sel)s, engine=~\"$engine\", mode=~\"steady|\", target=~\"$target\", workload=~\"$workload\", metric=~\"latency_p50|latency_p99|fsync_p99\"}"), "{{target}} {{workload}} {{metric}}"),
        ],
      },
      g.panel.table + g.needsDetail + {
        id: 15,
        title: "% of host (the seed article's view)",
        description: "Speed of each target as a percentage of the host's: 100% = as fast as the host, below = slower. Throughput: 100 × (1 - overhead); latency: 100 / (1 + overhead). Without agent.metrics_detail: true only each workload's headline metric.",
        gridPos: g.pos(x=0, y=30, w=24, h=8),
        fieldConfig+: {
          defaults+: {
            unit: "percent",
          },
          overrides: [
            {
              matcher: {
                id: "byName",
                options: "% of host",
              },
              properties: [
                {
                  id: "custom.cellOptions",
                  value: {
                    type: "color-text",
                  },
                },
                {
                  id: "thresholds",
                  value: {
                    mode: "absolute",
                    steps: [
                      {
                        color: "red",
                        value: null,
                      },
                      {
                        color: "orange",
                        value: 67,
                      },
                      {
                        color: "green",
                        value: 80,
                      },
                    ],
                  },
                },
              ],
            },
          ],
        },
        transformations: [
          {
            id: "organize",
            options: {
              excludeByName: {
                Time: true,
                __name__: true,
                job: true,
                instance: true,
                driver: true,
              },
              renameByName: {
                workload: "workload",
                Value: "% of host",
              },
              indexByName: {
                engine: 0,
                target: 1,
                workload: 2,
                metric: 3,
                Value: 4,
              },
            },
          },
        ],
        targets: [
          g.target(q("max without () (100 * (1 - layerprobe_overhead_ratio{%(sel)s, engine=~\"$engine\", mode=~\"steady|\", target=~\"$target\", workload=~\"$workload\", metric=~\"iops|bandwidth\"})) or max without () (100 / (1 + layerprobe_overhead_ratio{%(sel)s, engine=~\"$engine\", mode=~\"steady|\", target=~\"$target\", workload=~\"$workload\", metric=~\"latency_p50|latency_p99|fsync_p99\"}))"), "__auto", instant=true, format="table"),
        ],
      },
      g.row(16, "Raw figures per target (pooled over the last cycle's rounds)", y=38),
      g.panel.timeseries + g.needsDetail + {
        id: 17,
        title: "IOPS",
        description: "IOPS per target, workload and data direction, host included (fio read.iops, write.iops). Without agent.metrics_detail: true only the headline IOPS: random writes and small files.",
        gridPos: g.pos(x=0, y=39, w=12, h=8),
        fieldConfig+: {
          defaults+: {
            unit: "iops",
          },
          overrides: [],
        },
        options+: {
          legend+: {
            calcs: ["lastNotNull"],
          },
        },
        targets: [
          g.target(q("layerprobe_iops{%(sel)s, engine=~\"$engine\", mode=~\"steady|\", target=~\"host|$target\", workload=~\"$workload\"}"), "{{target}} {{workload}} {{op}}"),
        ],
      },
      g.panel.timeseries + g.needsDetail + {
        id: 18,
        title: "Bandwidth",
        description: "Bandwidth per target, workload and data direction, host included (fio bw_bytes). Without agent.metrics_detail: true only the headline bandwidth: sequential writes.",
        gridPos: g.pos(x=12, y=39, w=12, h=8),
        fieldConfig+: {
          defaults+: {
            unit: "Bps",
          },
          overrides: [],
        },
        options+: {
          legend+: {
            calcs: ["lastNotNull"],
          },
        },
        targets: [
          g.target(q("layerprobe_bandwidth_bytes_per_second{%(sel)s, engine=~\"$engine\", mode=~\"steady|\", target=~\"host|$target\", workload=~\"$workload\"}"), "{{target}} {{workload}} {{op}}"),
        ],
      },
      g.panel.timeseries + g.needsDetail + {
        id: 19,
        title: "fsync latency percentiles",
        description: "Latency of fsync calls in the fsync workload per target and percentile, host included (fio sync.lat_ns percentiles). Without agent.metrics_detail: true only p99, the fsync workload's headline.",
        gridPos: g.pos(x=0, y=47, w=12, h=8),
        fieldConfig+: {
          defaults+: {
            unit: "s",
          },
          overrides: [],
        },
        options+: {
          legend+: {
            calcs: ["lastNotNull"],
          },
        },
        targets: [
          g.target(q("layerprobe_latency_seconds{%(sel)s, engine=~\"$engine\", mode=~\"steady|\", target=~\"host|$target\", workload=\"fsync\", op=\"sync\"}"), "{{target}} p{{percentile}}"),
        ],
      },
      g.panel.timeseries + g.needsDetail + {
        id: 20,
        title: "Write latency percentiles",
        description: "Completion latency of writes per target, workload and percentile, host included (fio write.clat_ns percentiles). Needs agent.metrics_detail: true: the default exposes no write latency.",
        gridPos: g.pos(x=12, y=47, w=12, h=8),
        fieldConfig+: {
          defaults+: {
            unit: "s",
          },
          overrides: [],
        },
        options+: {
          legend+: {
            calcs: ["lastNotNull"],
          },
        },
        targets: [
          g.target(q("layerprobe_latency_seconds{%(sel)s, engine=~\"$engine\", mode=~\"steady|\", target=~\"host|$target\", workload=~\"$workload\", op=\"write\"}"), "{{target}} {{workload}} p{{percentile}}"),
        ],
      },
      g.panel.timeseries + {
        id: 21,
        title: "Raw fsync p99 overhead of the last cycle (computed by Prometheus)",
        description: "fsync p99 of each target divided by the host's, minus 1, from the raw figures of the last cycle. A cross-check of the agent's paired estimate: the two should agree roughly.",
        gridPos: g.pos(x=0, y=55, w=12, h=8),
        fieldConfig+: {
          defaults+: {
            unit: "percentunit",
          },
          overrides: [],
        },
        options+: {
          legend+: {
            calcs: ["lastNotNull"],
          },
        },
        targets: [
          g.target(q("layerprobe_latency_seconds{%(sel)s, engine=~\"$engine\", mode=~\"steady|\", target=~\"$target\", target!=\"host\", workload=\"fsync\", op=\"sync\", percentile=\"99\"} / ignoring (target) group_left () layerprobe_latency_seconds{%(sel)s, engine=~\"$engine\", mode=~\"steady|\", target=\"host\", workload=\"fsync\", op=\"sync\", percentile=\"99\"} - 1"), "{{target}}"),
        ],
      },
      g.panel.timeseries + g.needsDetail + {
        id: 22,
        title: "Read latency percentiles",
        description: "Completion latency of reads in the fsync workload (random read/write) per target and percentile, host included. Needs agent.metrics_detail: true: the default exposes no read latency.",
        gridPos: g.pos(x=12, y=55, w=12, h=8),
        fieldConfig+: {
          defaults+: {
            unit: "s",
          },
          overrides: [],
        },
        options+: {
          legend+: {
            calcs: ["lastNotNull"],
          },
        },
        targets: [
          g.target(q("layerprobe_latency_seconds{%(sel)s, engine=~\"$engine\", mode=~\"steady|\", target=~\"host|$target\", workload=~\"$workload\", op=\"read\"}"), "{{target}} {{workload}} p{{percentile}}"),
        ],
      },
      g.row(23, "Regression detector, budget and bytes written", y=63),
      g.panel.state_timeline + {
        id: 24,
        title: "fsync regression detector per target",
        description: "State of the fsync regression detector per target: regressed while a confirmed regression against the target's own baseline lasts (layerprobe_fsync_regression).",
        gridPos: g.pos(x=0, y=64, w=12, h=7),
        targets: [
          g.target(q("max by (engine, target) (layerprobe_fsync_regression{%(sel)s, engine=~\"$engine\", target=~\"$target\"})"), "{{engine}} {{target}}"),
        ],
      },
      g.panel.timeseries + {
        id: 25,
        title: "Daily write budget",
        description: "Bytes written in the last 24 hours against agent.daily_byte_budget. No data when unlimited.",
        gridPos: g.pos(x=12, y=64, w=12, h=7),
        fieldConfig+: {
          defaults+: {
            unit: "bytes",
          },
          overrides: [],
        },
        options+: {
          legend+: {
            calcs: ["lastNotNull"],
          },
        },
        targets: [
          g.target(q("layerprobe_budget_used_bytes{%(sel)s, engine=~\"$engine\"}"), "used {{engine}}"),
          g.target(q("layerprobe_daily_budget_bytes{%(sel)s, engine=~\"$engine\"}"), "budget {{engine}}", refId="B"),
        ],
      },
      g.panel.timeseries + {
        id: 26,
        title: "Write rate of the measurement jobs per target",
        description: "Bytes per second the measurement jobs wrote per target: spikes at every cycle.",
        gridPos: g.pos(x=0, y=71, w=12, h=7),
        fieldConfig+: {
          defaults+: {
            unit: "Bps",
          },
          overrides: [],
        },
        options+: {
          legend+: {
            calcs: ["lastNotNull"],
          },
        },
        targets: [
          g.target(q("sum by (engine, target) (rate(layerprobe_written_bytes_total{%(sel)s, engine=~\"$engine\"}[$__rate_interval]))"), "{{engine}} {{target}}"),
        ],
      },
      g.panel.bargauge + {
        id: 27,
        title: "Bytes written in the time range per target",
        description: "Bytes the measurement jobs wrote per target in the selected time range.",
        gridPos: g.pos(x=12, y=71, w=12, h=7),
        fieldConfig+: {
          defaults+: {
            unit: "bytes",
            thresholds+: {
              steps: [{"color": "green", "value": null}],
            },
          },
        },
        targets: [
          g.target(q("sum by (target) (increase(layerprobe_written_bytes_total{%(sel)s, engine=~\"$engine\"}[$__range]))"), "{{target}}", instant=true),
        ],
      },
      g.row(28, "Cold paths (fresh containers, copy-up)", y=78),
      g.panel.timeseries + {
        id: 29,
        title: "fsync p99 overhead of the container layer: cold vs steady",
        description: "Paired overhead (Hodges-Lehmann estimate) of fsync p99 in the container's writable layer versus the host directory, with its 95% interval as a band: cold = a freshly started container (the cold probe, every agent.cold_interval, 12h by default), steady = the long-lived probe container. 1 = twice the host's latency; LayerprobeColdFsyncOverheadHigh fires when the cold lower bound stays above 1.",
        gridPos: g.pos(x=0, y=79, w=12, h=9),
        fieldConfig+: {
          defaults+: {
            unit: "percentunit",
          },
          overrides: [
            {
              matcher: {
                id: "byName",
                options: "cold 95% high",
              },
              properties: [
                {
                  id: "custom.fillBelowTo",
                  value: "cold 95% low",
                },
                {
                  id: "custom.fillOpacity",
                  value: 15,
                },
                {
                  id: "custom.lineWidth",
                  value: 0,
                },
                {
                  id: "custom.hideFrom",
                  value: {
                    legend: true,
                    tooltip: false,
                    viz: false,
                  },
                },
              ],
            },
            {
              matcher: {
                id: "byName",
                options: "cold 95% low",
              },
              properties: [
                {
                  id: "custom.lineWidth",
                  value: 0,
                },
                {
                  id: "custom.hideFrom",
                  value: {
                    legend: true,
                    tooltip: false,
                    viz: false,
                  },
                },
              ],
            },
            {
              matcher: {
                id: "byName",
                options: "steady 95% high",
              },
              properties: [
                {
                  id: "custom.fillBelowTo",
                  value: "steady 95% low",
                },
                {
                  id: "custom.fillOpacity",
                  value: 15,
                },
                {
                  id: "custom.lineWidth",
                  value: 0,
                },
                {
                  id: "custom.hideFrom",
                  value: {
                    legend: true,
                    tooltip: false,
                    viz: false,
                  },
                },
              ],
            },
            {
              matcher: {
                id: "byName",
                options: "steady 95% low",
              },
              properties: [
                {
                  id: "custom.lineWidth",
                  value: 0,
                },
                {
                  id: "custom.hideFrom",
                  value: {
                    legend: true,
                    tooltip: false,
                    viz: false,
                  },
                },
              ],
            },
          ],
        },
        options+: {
          legend+: {
            calcs: ["lastNotNull", "max"],
          },
        },
        targets: [
          g.target(q("max(layerprobe_overhead_ratio{%(sel)s, engine=~\"$engine\", mode=\"cold\", target=\"container\", workload=\"fsync\", metric=\"fsync_p99\"})"), "cold"),
          g.target(q("max(layerprobe_overhead_ci_low_ratio{%(sel)s, engine=~\"$engine\", mode=\"cold\", target=\"container\", workload=\"fsync\", metric=\"fsync_p99\"})"), "cold 95% low", refId="B"),
          g.target(q("max(layerprobe_overhead_ci_high_ratio{%(sel)s, engine=~\"$engine\", mode=\"cold\", target=\"container\", workload=\"fsync\", metric=\"fsync_p99\"})"), "cold 95% high", refId="C"),
          g.target(q("max(layerprobe_overhead_ratio{%(sel)s, engine=~\"$engine\", mode=~\"steady|\", target=\"container\", workload=\"fsync\", metric=\"fsync_p99\"})"), "steady", refId="D"),
          g.target(q("max(layerprobe_overhead_ci_low_ratio{%(sel)s, engine=~\"$engine\", mode=~\"steady|\", target=\"container\", workload=\"fsync\", metric=\"fsync_p99\"})"), "steady 95% low", refId="E"),
          g.target(q("max(layerprobe_overhead_ci_high_ratio{%(sel)s, engine=~\"$engine\", mode=~\"steady|\", target=\"container\", workload=\"fsync\", metric=\"fsync_p99\"})"), "steady 95% high", refId="F"),
        ],
      },
      g.panel.timeseries + {
        id: 30,
        title: "Copy-up latency per file size (host vs container)",
        description: "Median latency of the first 4 KiB write + fsync (open, pwrite, fsync, close) to a file of 1 MiB (1048576 bytes), 16 MiB or 64 MiB: container = a file in a lower image layer of a fresh container, which overlay2 copies up in full before the write; host = an equal file on the host directory. A container line that climbs with the size is the copy-up.",
        gridPos: g.pos(x=12, y=79, w=12, h=9),
        fieldConfig+: {
          defaults+: {
            unit: "s",
          },
          overrides: [],
        },
        options+: {
          legend+: {
            calcs: ["lastNotNull"],
          },
        },
        targets: [
          g.target(q("max by (target, size_bytes) (layerprobe_copyup_latency_seconds{%(sel)s, engine=~\"$engine\"})"), "{{target}} {{size_bytes}} bytes"),
        ],
      },
      g.panel.timeseries + {
        id: 31,
        title: "Copy-up cost per MiB",
        description: "Extra latency of the first write to a file in a lower image layer, per MiB of the file's size: the Theil-Sen slope of (container - host) latency against the file size over the recent cold rounds (layerprobe_copyup_cost_seconds_per_byte x 1048576). Near 0 with reflink (btrfs, XFS reflink=1); large when every copy-up is a full data copy.",
        gridPos: g.pos(x=0, y=88, w=8, h=7),
        fieldConfig+: {
          defaults+: {
            unit: "s",
          },
          overrides: [],
        },
        options+: {
          legend+: {
            calcs: ["lastNotNull"],
          },
        },
        targets: [
          g.target(q("max by (engine, driver) (layerprobe_copyup_cost_seconds_per_byte{%(sel)s, engine=~\"$engine\"}) * 1048576"), "{{engine}} {{driver}}"),
        ],
      },
      g.panel.stat + {
        id: 32,
        title: "Reflink on the data root",
        description: "Whether the file system of the engine's data root can share extents (a FICLONE between two files in the scratch directory succeeds). With reflink, overlay2 copies up by cloning and copy-up is cheap; without it every copy-up copies the whole file.",
        gridPos: g.pos(x=8, y=88, w=5, h=7),
        fieldConfig+: {
          defaults+: {
            unit: "none",
            mappings: [
              {
                type: "value",
                options: {
                  "0": {
                    text: "no reflink: full copy",
                    color: "orange",
                    index: 0,
                  },
                  "1": {
                    text: "reflink: cheap copy-up",
                    color: "green",
                    index: 1,
                  },
                },
              },
            ],
            thresholds: {
              mode: "absolute",
              steps: [{"color": "orange", "value": null}, {"color": "green", "value": 1}],
            },
            color: {
              mode: "thresholds",
            },
          },
        },
        options+: {
          colorMode: "background",
          textMode: "value_and_name",
        },
        targets: [
          g.target(q("max by (engine, backing_fs) (layerprobe_backing_fs_reflink{%(sel)s, engine=~\"$engine\"})"), "{{engine}} ({{backing_fs}})", instant=true),
        ],
      },
      g.panel.bargauge + {
        id: 33,
        title: "Cold cycles in the time range by result",
        description: "Cold-probe cycles finished in the selected time range: ok, failed, skipped (by a guardrail) or interrupted. Cold cycles run every agent.cold_interval (12h by default; 0 switches the cold probe off).",
        gridPos: g.pos(x=13, y=88, w=6, h=7),
        fieldConfig+: {
          defaults+: {
            unit: "short",
            thresholds+: {
              steps: [{"color": "green", "value": null}],
            },
          },
        },
        targets: [
          g.target(q("sum by (result) (increase(layerprobe_cycles_total{%(sel)s, engine=~\"$engine\", mode=\"cold\"}[$__range]))"), "{{result}}", instant=true),
        ],
      },
      g.panel.stat + {
        id: 34,
        title: "Last successful cold cycle",
        description: "How long ago the last successful cold cycle of each engine ended: the cold figures in this row are that old. Red above 30h (2.5 cold intervals of 12h).",
        gridPos: g.pos(x=19, y=88, w=5, h=7),
        fieldConfig+: {
          defaults+: {
            unit: "s",
            thresholds: {
              mode: "absolute",
              steps: [
                {
                  color: "green",
                  value: null,
                },
                {
                  color: "red",
                  value: 108000,
                },
              ],
            },
            color: {
              mode: "thresholds",
            },
          },
        },
        options+: {
          colorMode: "background",
          textMode: "auto",
        },
        targets: [
          g.target(q("max by (engine) (time() - layerprobe_last_success_timestamp_seconds{%(sel)s, engine=~\"$engine\", mode=\"cold\"})"), "{{engine}}", instant=true),
        ],
      },
      g.panel.timeseries + {
        id: 40,
        title: "Lookups in the image's tree: what the layers add",
        description: "Extra time in a fresh container over the host for lookups in the cold image's tree of small files (2000 files in nested directories, in the image's layer), median of the per-round differences over the recent cold rounds, with its 95% interval (absent below 6 cold rounds): walk = a stat walk of the whole tree (every name looked up through the image's layers for the first time); dir_create = the first file created in a directory of the tree (overlay2 copies the directory and its ancestors up first). layerprobe_lookup_seconds has the times themselves.",
        gridPos: g.pos(x=0, y=95, w=24, h=8),
        fieldConfig+: {
          defaults+: {
            unit: "s",
          },
          overrides: [],
        },
        options+: {
          legend+: {
            calcs: ["lastNotNull"],
          },
        },
        targets: [
          g.target(q("max by (lookup) (layerprobe_lookup_extra_seconds{%(sel)s, engine=~\"$engine\"})"), "{{lookup}}"),
          g.target(q("max by (lookup) (layerprobe_lookup_extra_ci_low_seconds{%(sel)s, engine=~\"$engine\"})"), "{{lookup}} 95% low", refId="B"),
          g.target(q("max by (lookup) (layerprobe_lookup_extra_ci_high_seconds{%(sel)s, engine=~\"$engine\"})"), "{{lookup}} 95% high", refId="C"),
        ],
      },
      g.row(35, "Who pays the tax: containers writing into their writable layer", y=103),
      g.panel.bargauge + {
        id: 36,
        title: "Bytes in the writable layer per container",
        description: "What each running container wrote into its writable layer since it was created, net of deletions (layerprobe_container_layer_written_bytes), from the layer-write advisor's last pass. Only the top advisor.metrics_top_n containers (at most 3 without agent.metrics_detail: true) have their own bar; _other sums the rest. Move heavy write paths to a volume: layerprobe advise or GET /api/v1/containers names the directories.",
        gridPos: g.pos(x=0, y=104, w=12, h=8),
        fieldConfig+: {
          defaults+: {
            unit: "bytes",
            thresholds: {mode: "absolute", steps: [{color: "green", value: null}, {color: "orange", value: 1073741824}]},
            color: {mode: "thresholds"},
          },
        },
        targets: [
          g.target(q("sort_desc(max by (engine, container, image) (layerprobe_container_layer_written_bytes{%(sel)s, engine=~\"$engine\"}))"), "{{container}} ({{image}})", instant=true),
        ],
      },
      g.panel.timeseries + {
        id: 37,
        title: "Writable-layer bytes per container over time",
        description: "layerprobe_container_layer_written_bytes per top container over the time range: a line that keeps climbing is a container paying the writable layer's tax on every write. Updated with every measurement cycle (agent.interval).",
        gridPos: g.pos(x=12, y=104, w=12, h=8),
        fieldConfig+: {defaults+: {unit: "bytes"}},
        targets: [
          g.target(q("max by (engine, container) (layerprobe_container_layer_written_bytes{%(sel)s, engine=~\"$engine\"})"), "{{engine}} {{container}}"),
        ],
      },
      g.panel.stat + {
        id: 38,
        title: "Databases with their data in the writable layer",
        description: "Running containers of known databases and queues (postgres, mysql, mariadb, mongo, redis, elasticsearch, kafka, ...) whose data directory is on no volume or bind mount (layerprobe_databases_in_layer). Anything above 0 pays the layer's cost on every write and loses its data with the container; the alert LayerprobeDatabaseInWritableLayer fires on it.",
        gridPos: g.pos(x=0, y=112, w=6, h=6),
        fieldConfig+: {
          defaults+: {
            unit: "short",
            thresholds: {mode: "absolute", steps: [{color: "green", value: null}, {color: "red", value: 1}]},
            color: {mode: "thresholds"},
          },
        },
        options+: {colorMode: "background", textMode: "value_and_name"},
        targets: [
          g.target(q("max by (engine) (layerprobe_databases_in_layer{%(sel)s, engine=~\"$engine\"})"), "{{engine}}", instant=true),
        ],
      },
      g.panel.timeseries + {
        id: 39,
        title: "Advisor pass: time and CPU",
        description: "What the layer-write advisor's last pass over the engine cost the agent: its duration and the CPU time the agent spent meanwhile (layerprobe_advisor_pass_duration_seconds, layerprobe_advisor_pass_cpu_seconds). A pass walks the containers' upper directories and mounts within advisor.walk_max_entries and walk_max_time per container.",
        gridPos: g.pos(x=6, y=112, w=18, h=6),
        fieldConfig+: {defaults+: {unit: "s"}},
        targets: [
          g.target(q("max by (engine) (layerprobe_advisor_pass_duration_seconds{%(sel)s, engine=~\"$engine\"})"), "{{engine}} duration"),
          g.target(q("max by (engine) (layerprobe_advisor_pass_cpu_seconds{%(sel)s, engine=~\"$engine\"})"), "{{engine}} CPU", refId="B"),
        ],
      },
    ],
  )
