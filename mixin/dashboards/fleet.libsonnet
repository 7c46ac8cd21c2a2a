// The layerprobe / Fleet overview dashboard (layerprobe-fleet.json). Panel expressions use
// %(sel)s for the cluster, job and instance matchers (lib/grafana.libsonnet).
local g = import '../lib/grafana.libsonnet';

// A table of instant queries merged on their labels: names renames the
// value columns ("Value #A": "median"), order puts columns first, hide
// drops the labels nobody needs, hostLinks links the instance column to
// the host dashboard.
local mergedTable(id, title, description, pos, unit, targets, names, order, hide=[], sortBy=null, hostLinks=false) =
  g.panel.table + {
    id: id,
    title: title,
    description: description,
    gridPos: pos,
    fieldConfig+: {
      defaults+: { unit: unit },
      overrides: if hostLinks then [{
        matcher: { id: 'byName', options: 'instance' },
        properties: [{
          id: 'links',
          value: [{
            title: 'Open the host detail dashboard',
            url: '/d/layerprobe-host/layerprobe-host-detail?${__url_time_range}&var-datasource=${datasource}&var-job=${__data.fields.job}&var-instance=${__data.fields.instance}',
          }],
        }],
      }] else [],
    },
    options+: if sortBy != null then { sortBy: [{ displayName: sortBy, desc: true }] } else {},
    transformations: [
      { id: 'merge', options: {} },
      {
        id: 'organize',
        options: {
          excludeByName: { [l]: true for l in ['Time', '__name__'] + hide },
          renameByName: names,
          indexByName: { [order[i]]: i for i in std.range(0, std.length(order) - 1) },
        },
      },
    ],
    targets: targets,
  };
// A column of a merged table in another unit.
local unitOf(column, unit) = { fieldConfig+: { overrides+: [{ matcher: { id: 'byName', options: column }, properties: [{ id: 'unit', value: unit }] }] } };

function(c)
  local q = g.query(c);
  g.dashboard(
    c,
    uid="layerprobe-fleet",
    title="layerprobe / Fleet overview",
    description="Every Docker host layerprobe measures: hosts ranked by fsync overhead in the container storage paths, the storage driver and file system mix, stale or failing agents, the bytes the measurements write, and the cold paths of freshly started containers (cold fsync overhead, copy-up cost, reflink).",
    from="now-7d",
    variables=g.variable.agent(c, multiInstance=true) + [
      {
        type: 'custom',
        name: 'target',
        label: 'Target',
        query: 'container,volume,bind',
        current: { text: 'container', value: 'container' },
        options: [
          { text: t, value: t, selected: t == 'container' }
          for t in ['container', 'volume', 'bind']
        ],
        hide: 0,
        multi: false,
        includeAll: false,
        skipUrlSync: false,
      },
    ],
    panels=[
      g.row(1, "Fleet health", y=0),
      g.panel.stat + {
        id: 2,
        title: "Agents reporting",
        description: "layerprobe agents Prometheus scrapes now (one layerprobe_build_info series per agent).",
        gridPos: g.pos(x=0, y=1, w=4, h=4),
        fieldConfig+: {
          defaults+: {
            unit: "short",
          },
        },
        options+: {
          colorMode: "value",
          textMode: "auto",
        },
        targets: [
          g.target(q("count(count by (job, instance) (layerprobe_build_info{%(sel)s}))"), "__auto", instant=true),
        ],
      },
      g.panel.stat + {
        id: 3,
        title: "Engines measured",
        description: "Docker engines the selected agents measure (layerprobe_engine_info).",
        gridPos: g.pos(x=4, y=1, w=4, h=4),
        fieldConfig+: {
          defaults+: {
            unit: "short",
          },
        },
        options+: {
          colorMode: "value",
          textMode: "auto",
        },
        targets: [
          g.target(q("count(layerprobe_engine_info{%(sel)s, engine=~\"$engine\"})"), "__auto", instant=true),
        ],
      },
      g.panel.stat + {
        id: 4,
        title: "Stale engines",
        description: "Engines whose last successful cycle ended more than 15h (2.5 default intervals of 6h) ago: their figures are old. Same threshold as the LayerprobeAgentStale alert.",
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
          g.target(q("count((time() - layerprobe_last_success_timestamp_seconds{%(sel)s, engine=~\"$engine\", mode=~\"steady|\"}) > 54000) or vector(0)"), "__auto", instant=true),
        ],
      },
      g.panel.stat + {
        id: 5,
        title: "Engines never measured",
        description: "Engines the agent knows without a single successful cycle yet (no last-success timestamp).",
        gridPos: g.pos(x=12, y=1, w=4, h=4),
        fieldConfig+: {
          defaults+: {
            unit: "short",
            thresholds: {
              mode: "absolute",
              steps: [{"color": "green", "value": null}, {"color": "orange", "value": 1}],
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
          g.target(q("count(layerprobe_engine_info{%(sel)s, engine=~\"$engine\"} unless on (job, instance, engine) layerprobe_last_success_timestamp_seconds{%(sel)s, engine=~\"$engine\", mode=~\"steady|\"}) or vector(0)"), "__auto", instant=true),
        ],
      },
      g.panel.stat + {
        id: 6,
        title: "Confirmed fsync regressions",
        description: "Targets whose fsync regression detector currently says regressed (layerprobe_fsync_regression == 1).",
        gridPos: g.pos(x=16, y=1, w=4, h=4),
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
        id: 7,
        title: "Firing alerts",
        description: "Alerts from the shipped rules (deploy/prometheus) firing now for the selected agents.",
        gridPos: g.pos(x=20, y=1, w=4, h=4),
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
          g.target(q("count(ALERTS{alertname=~\"Layerprobe.*\", alertstate=\"firing\", %(sel)s}) or vector(0)"), "__auto", instant=true),
        ],
      },
      g.row(8, "Hosts ranked by fsync overhead", y=5),
      g.panel.bargauge + {
        id: 9,
        title: "Worst fsync p99 overhead per host ($target)",
        description: "Hosts ranked by the paired overhead (Hodges-Lehmann estimate) of fsync p99 latency in the $target target versus the host directory on the same file system: 0.5 = 50% slower than the host, negative = faster. Top 25, from the last published cycle.",
        gridPos: g.pos(x=0, y=6, w=10, h=10),
        fieldConfig+: {
          defaults+: {
            unit: "percentunit",
            thresholds+: {
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
        },
        targets: [
          g.target(q("sort_desc(topk(25, max by (instance, engine) (layerprobe_overhead_ratio{%(sel)s, engine=~\"$engine\", mode=~\"steady|\", target=\"$target\", workload=\"fsync\", metric=\"fsync_p99\"})))"), "{{instance}} {{engine}}", instant=true),
        ],
      },
      g.panel.table + {
        id: 10,
        title: "fsync p99 overhead per host with its 95% interval ($target)",
        description: "Per host and engine: the paired overhead (Hodges-Lehmann estimate) of fsync p99 in the $target target and the bounds of its exact 95% confidence interval (a lower bound above 0 means significantly slower than the host), with the storage driver and the backing file system. Click a host for its detail.",
        gridPos: g.pos(x=10, y=6, w=14, h=10),
        fieldConfig+: {
          defaults+: {
            unit: "percentunit",
          },
          overrides: [
            {
              matcher: {
                id: "byName",
                options: "instance",
              },
              properties: [
                {
                  id: "links",
                  value: [
                    {
                      title: "Open the host detail dashboard",
                      url: "/d/layerprobe-host/layerprobe-host-detail?${__url_time_range}&var-datasource=${datasource}&var-job=${__data.fields.job}&var-instance=${__data.fields.instance}",
                    },
                  ],
                },
              ],
            },
          ],
        },
        options+: {
          sortBy: [{"displayName": "overhead", "desc": true}],
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
                workload: true,
                metric: true,
                target: true,
              },
              renameByName: {
                "Value #A": "overhead",
                "Value #B": "95% CI low",
                "Value #C": "95% CI high",
                backing_fs: "backing file system",
              },
              indexByName: {
                instance: 0,
                engine: 1,
                driver: 2,
                backing_fs: 3,
                "Value #A": 4,
                "Value #B": 5,
                "Value #C": 6,
                job: 7,
              },
            },
          },
        ],
        targets: [
          g.target(q("max without () (layerprobe_overhead_ratio{%(sel)s, engine=~\"$engine\", mode=~\"steady|\", target=\"$target\", workload=\"fsync\", metric=\"fsync_p99\"} * on (job, instance, engine) group_left (backing_fs) max by (job, instance, engine, backing_fs) (layerprobe_engine_info{%(sel)s, engine=~\"$engine\"}))"), "__auto", instant=true, format="table"),
          g.target(q("max without () (layerprobe_overhead_ci_low_ratio{%(sel)s, engine=~\"$engine\", mode=~\"steady|\", target=\"$target\", workload=\"fsync\", metric=\"fsync_p99\"} * on (job, instance, engine) group_left (backing_fs) max by (job, instance, engine, backing_fs) (layerprobe_engine_info{%(sel)s, engine=~\"$engine\"}))"), "__auto", refId="B", instant=true, format="table"),
          g.target(q("max without () (layerprobe_overhead_ci_high_ratio{%(sel)s, engine=~\"$engine\", mode=~\"steady|\", target=\"$target\", workload=\"fsync\", metric=\"fsync_p99\"} * on (job, instance, engine) group_left (backing_fs) max by (job, instance, engine, backing_fs) (layerprobe_engine_info{%(sel)s, engine=~\"$engine\"}))"), "__auto", refId="C", instant=true, format="table"),
        ],
      },
      g.row(11, "Storage drivers and file systems", y=16),
      g.panel.piechart + {
        id: 12,
        title: "Storage drivers",
        description: "Engines per storage driver (layerprobe_engine_info).",
        gridPos: g.pos(x=0, y=17, w=6, h=8),
        targets: [
          g.target(q("count by (driver) (layerprobe_engine_info{%(sel)s, engine=~\"$engine\"})"), "{{driver}}", instant=true),
        ],
      },
      g.panel.piechart + {
        id: 13,
        title: "Backing file systems",
        description: "Engines per file system under the data root, as the engine reports it (extfs, xfs, btrfs, ...).",
        gridPos: g.pos(x=6, y=17, w=6, h=8),
        targets: [
          g.target(q("count by (backing_fs) (layerprobe_engine_info{%(sel)s, engine=~\"$engine\"})"), "{{backing_fs}}", instant=true),
        ],
      },
      g.panel.bargauge + {
        id: 14,
        title: "Mean fsync p99 overhead by storage driver ($target)",
        description: "The fleet's mean paired overhead of fsync p99 in the $target target, per storage driver.",
        gridPos: g.pos(x=12, y=17, w=6, h=8),
        fieldConfig+: {
          defaults+: {
            unit: "percentunit",
            thresholds+: {
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
        },
        targets: [
          g.target(q("avg by (driver) (layerprobe_overhead_ratio{%(sel)s, engine=~\"$engine\", mode=~\"steady|\", target=\"$target\", workload=\"fsync\", metric=\"fsync_p99\"})"), "{{driver}}", instant=true),
        ],
      },
      g.panel.piechart + {
        id: 15,
        title: "Agent versions",
        description: "Agents per layerprobe version (layerprobe_build_info).",
        gridPos: g.pos(x=18, y=17, w=6, h=8),
        targets: [
          g.target(q("count by (version) (layerprobe_build_info{%(sel)s})"), "{{version}}", instant=true),
        ],
      },
      g.row(16, "Stale or failing agents", y=25),
      g.panel.table + {
        id: 17,
        title: "Agent health per engine",
        description: "Per host and engine: how long ago the last successful steady-state cycle ended (stale above 15h with the default 6h interval), the last steady cycle's duration, and the cycles (steady and cold together) that succeeded, failed or were skipped by a guardrail in the selected time range, counted from the hourly records of the cycle counters (the last hour's cycles appear after the next hourly evaluation; ranges under two hours show none). Sorted by age, oldest first. Click a host for its detail.",
        gridPos: g.pos(x=0, y=26, w=16, h=9),
        fieldConfig+: {
          defaults+: {
            unit: "short",
          },
          overrides: [
            {
              matcher: {
                id: "byName",
                options: "last success age",
              },
              properties: [
                {
                  id: "unit",
                  value: "s",
                },
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
                    steps: [{"color": "green", "value": null}, {"color": "red", "value": 54000}],
                  },
                },
              ],
            },
            {
              matcher: {
                id: "byName",
                options: "last cycle duration",
              },
              properties: [{"id": "unit", "value": "s"}],
            },
            {
              matcher: {
                id: "byName",
                options: "ok cycles",
              },
              properties: [{"id": "decimals", "value": 0}],
            },
            {
              matcher: {
                id: "byName",
                options: "skipped cycles",
              },
              properties: [{"id": "decimals", "value": 0}],
            },
            {
              matcher: {
                id: "byName",
                options: "failed cycles",
              },
              properties: [
                {
                  id: "decimals",
                  value: 0,
                },
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
                    steps: [{"color": "green", "value": null}, {"color": "red", "value": 0.5}],
                  },
                },
              ],
            },
            {
              matcher: {
                id: "byName",
                options: "instance",
              },
              properties: [
                {
                  id: "links",
                  value: [
                    {
                      title: "Open the host detail dashboard",
                      url: "/d/layerprobe-host/layerprobe-host-detail?${__url_time_range}&var-datasource=${datasource}&var-job=${__data.fields.job}&var-instance=${__data.fields.instance}",
                    },
                  ],
                },
              ],
            },
          ],
        },
        options+: {
          sortBy: [{"displayName": "last success age", "desc": true}],
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
              },
              renameByName: {
                "Value #A": "last success age",
                "Value #B": "last cycle duration",
                "Value #C": "ok cycles",
                "Value #D": "failed cycles",
                "Value #E": "skipped cycles",
              },
              indexByName: {
                instance: 0,
                engine: 1,
                "Value #A": 2,
                "Value #B": 3,
                "Value #C": 4,
                "Value #D": 5,
                "Value #E": 6,
                job: 7,
              },
            },
          },
        ],
        targets: [
          g.target(q("max by (job, instance, engine) (time() - layerprobe_last_success_timestamp_seconds{%(sel)s, engine=~\"$engine\", mode=~\"steady|\"})"), "__auto", instant=true, format="table"),
          g.target(q("max by (job, instance, engine) (layerprobe_cycle_duration_seconds{%(sel)s, engine=~\"$engine\", mode=~\"steady|\"})"), "__auto", refId="B", instant=true, format="table"),
          g.target(q("sum by (job, instance, engine) (increase(engine_result:layerprobe_cycles_total:sum{%(sel)s, engine=~\"$engine\", result=\"ok\"}[$__range]))"), "__auto", refId="C", instant=true, format="table"),
          g.target(q("sum by (job, instance, engine) (increase(engine_result:layerprobe_cycles_total:sum{%(sel)s, engine=~\"$engine\", result=\"failed\"}[$__range]))"), "__auto", refId="D", instant=true, format="table"),
          g.target(q("sum by (job, instance, engine) (increase(engine:layerprobe_cycle_skips_total:sum{%(sel)s, engine=~\"$engine\"}[$__range]))"), "__auto", refId="E", instant=true, format="table"),
        ],
      },
      g.panel.bargauge + {
        id: 18,
        title: "Skipped cycles by reason",
        description: "Cycles a guardrail skipped in the selected time range, by reason (budget_exhausted, busy_disk, busy_io_pressure, container_churn, host_locked, low_space), summed from the fleet's hourly records of the skip counters: the hours that end in the range, an engine's first hour not among them (the last hour's skips appear after the next hourly evaluation).",
        gridPos: g.pos(x=16, y=26, w=8, h=9),
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
          g.target(q("sum by (reason) (sum_over_time(job_engine_reason:layerprobe_cycle_skips:increase1h{%(fleet)s, engine=~\"$engine\"}[$__range]))"), "{{reason}}", instant=true),
        ],
      },
      g.panel.table + {
        id: 19,
        title: "Firing layerprobe alerts per host",
        description: "The shipped alerts (deploy/prometheus/layerprobe-rules.yml) firing now for the selected agents, with their labels. Empty when all is well.",
        gridPos: g.pos(x=0, y=35, w=24, h=6),
        fieldConfig+: {
          defaults+: {
            unit: "none",
          },
          overrides: [
            {
              matcher: {
                id: "byName",
                options: "instance",
              },
              properties: [
                {
                  id: "links",
                  value: [
                    {
                      title: "Open the host detail dashboard",
                      url: "/d/layerprobe-host/layerprobe-host-detail?${__url_time_range}&var-datasource=${datasource}&var-job=${__data.fields.job}&var-instance=${__data.fields.instance}",
                    },
                  ],
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
                Value: true,
                alertstate: true,
              },
              renameByName: {},
              indexByName: {},
            },
          },
        ],
        targets: [
          g.target(q("ALERTS{alertname=~\"Layerprobe.*\", alertstate=\"firing\", %(sel)s}"), "__auto", instant=true, format="table"),
        ],
      },
      g.row(20, "Impact: bytes written", y=41),
      g.panel.timeseries + {
        id: 21,
        title: "Write rate of the measurement jobs across the fleet",
        description: "Bytes per second the layerprobe measurement jobs wrote: all hosts together, and the engine that wrote the most in the hour (the load the agent puts on one host's data-root disk). Hourly figures from the fleet's hourly records of the byte counters, so a cycle's burst is spread over its hour; an engine's first hour is not in them. Which hosts wrote what: the table beside it, or a host's detail dashboard.",
        gridPos: g.pos(x=0, y=42, w=12, h=8),
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
          g.target(q("sum(avg_over_time(job_engine:layerprobe_written_bytes:sum_increase1h{%(fleet)s, engine=~\"$engine\"}[$__interval])) / 3600"), "all hosts", interval="1h"),
          g.target(q("max(max_over_time(job_engine:layerprobe_written_bytes:max_increase1h{%(fleet)s, engine=~\"$engine\"}[$__interval])) / 3600"), "busiest engine", refId="B", interval="1h"),
        ],
      },
      g.panel.bargauge + {
        id: 22,
        title: "Bytes written per host in the time range",
        description: "Bytes the measurement jobs wrote per host in the selected time range (all targets), from the hourly records of the byte counters (ranges under two hours show none).",
        gridPos: g.pos(x=12, y=42, w=6, h=8),
        fieldConfig+: {
          defaults+: {
            unit: "bytes",
            thresholds+: {
              steps: [{"color": "green", "value": null}],
            },
          },
        },
        targets: [
          g.target(q("sort_desc(sum by (instance) (increase(engine:layerprobe_written_bytes_total:sum{%(sel)s, engine=~\"$engine\"}[$__range])))"), "{{instance}}", instant=true),
        ],
      },
      g.panel.bargauge + {
        id: 23,
        title: "Daily write budget used per engine",
        description: "Bytes written in the last 24 hours as a share of agent.daily_byte_budget. At 100% cycles are skipped (budget_exhausted). Absent for engines with an unlimited budget.",
        gridPos: g.pos(x=18, y=42, w=6, h=8),
        fieldConfig+: {
          defaults+: {
            unit: "percentunit",
            thresholds+: {
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
            min: 0,
            max: 1,
          },
        },
        targets: [
          g.target(q("sort_desc(max by (instance, engine) (layerprobe_budget_used_bytes{%(sel)s, engine=~\"$engine\"} / layerprobe_daily_budget_bytes{%(sel)s, engine=~\"$engine\"}))"), "{{instance}} {{engine}}", instant=true),
        ],
      },
      g.row(24, "Cold paths: fresh containers and copy-up", y=50),
      g.panel.table + {
        id: 25,
        title: "Cold fsync overhead and copy-up cost per host",
        description: "Per host and engine, from the cold probe (a freshly started container every agent.cold_interval, 12h by default): the paired median fsync p99 overhead of the container's writable layer with its 95% interval (1 = twice the host's latency; LayerprobeColdFsyncOverheadHigh fires when the lower bound stays above 1), the steady-state overhead next to it, the copy-up cost per MiB of a file in a lower image layer, and whether the data root's file system has reflink. Engines without cold results are missing. Click a host for its detail.",
        gridPos: g.pos(x=0, y=51, w=24, h=9),
        fieldConfig+: {
          defaults+: {
            unit: "percentunit",
          },
          overrides: [
            {
              matcher: {
                id: "byName",
                options: "cold 95% CI low",
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
                    steps: [{"color": "green", "value": null}, {"color": "red", "value": 1}],
                  },
                },
              ],
            },
            {
              matcher: {
                id: "byName",
                options: "copy-up per MiB",
              },
              properties: [{"id": "unit", "value": "s"}],
            },
            {
              matcher: {
                id: "byName",
                options: "reflink",
              },
              properties: [
                {
                  id: "unit",
                  value: "none",
                },
                {
                  id: "mappings",
                  value: [
                    {
                      type: "value",
                      options: {
                        "0": {
                          text: "no",
                          index: 0,
                        },
                        "1": {
                          text: "yes",
                          index: 1,
                        },
                      },
                    },
                  ],
                },
              ],
            },
            {
              matcher: {
                id: "byName",
                options: "instance",
              },
              properties: [
                {
                  id: "links",
                  value: [
                    {
                      title: "Open the host detail dashboard",
                      url: "/d/layerprobe-host/layerprobe-host-detail?${__url_time_range}&var-datasource=${datasource}&var-job=${__data.fields.job}&var-instance=${__data.fields.instance}",
                    },
                  ],
                },
              ],
            },
          ],
        },
        options+: {
          sortBy: [{"displayName": "cold overhead", "desc": true}],
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
              },
              renameByName: {
                "Value #A": "cold overhead",
                "Value #B": "cold 95% CI low",
                "Value #C": "cold 95% CI high",
                "Value #D": "steady overhead",
                "Value #E": "copy-up per MiB",
                "Value #F": "reflink",
                backing_fs: "backing file system",
              },
              indexByName: {
                instance: 0,
                engine: 1,
                driver: 2,
                backing_fs: 3,
                "Value #A": 4,
                "Value #B": 5,
                "Value #C": 6,
                "Value #D": 7,
                "Value #E": 8,
                "Value #F": 9,
                job: 10,
              },
            },
          },
        ],
        targets: [
          g.target(q("max by (job, instance, engine) (layerprobe_overhead_ratio{%(sel)s, engine=~\"$engine\", mode=\"cold\", target=\"container\", workload=\"fsync\", metric=\"fsync_p99\"}) * on (job, instance, engine) group_left (driver, backing_fs) max by (job, instance, engine, driver, backing_fs) (layerprobe_engine_info{%(sel)s, engine=~\"$engine\"})"), "__auto", instant=true, format="table"),
          g.target(q("max by (job, instance, engine) (layerprobe_overhead_ci_low_ratio{%(sel)s, engine=~\"$engine\", mode=\"cold\", target=\"container\", workload=\"fsync\", metric=\"fsync_p99\"}) * on (job, instance, engine) group_left (driver, backing_fs) max by (job, instance, engine, driver, backing_fs) (layerprobe_engine_info{%(sel)s, engine=~\"$engine\"})"), "__auto", refId="B", instant=true, format="table"),
          g.target(q("max by (job, instance, engine) (layerprobe_overhead_ci_high_ratio{%(sel)s, engine=~\"$engine\", mode=\"cold\", target=\"container\", workload=\"fsync\", metric=\"fsync_p99\"}) * on (job, instance, engine) group_left (driver, backing_fs) max by (job, instance, engine, driver, backing_fs) (layerprobe_engine_info{%(sel)s, engine=~\"$engine\"})"), "__auto", refId="C", instant=true, format="table"),
          g.target(q("max by (job, instance, engine) (layerprobe_overhead_ratio{%(sel)s, engine=~\"$engine\", mode=~\"steady|\", target=\"container\", workload=\"fsync\", metric=\"fsync_p99\"}) * on (job, instance, engine) group_left (driver, backing_fs) max by (job, instance, engine, driver, backing_fs) (layerprobe_engine_info{%(sel)s, engine=~\"$engine\"})"), "__auto", refId="D", instant=true, format="table"),
          g.target(q("max by (job, instance, engine) (layerprobe_copyup_cost_seconds_per_byte{%(sel)s, engine=~\"$engine\"}) * on (job, instance, engine) group_left (driver, backing_fs) max by (job, instance, engine, driver, backing_fs) (layerprobe_engine_info{%(sel)s, engine=~\"$engine\"}) * 1048576"), "__auto", refId="E", instant=true, format="table"),
          g.target(q("max by (job, instance, engine) (layerprobe_backing_fs_reflink{%(sel)s, engine=~\"$engine\"}) * on (job, instance, engine) group_left (driver, backing_fs) max by (job, instance, engine, driver, backing_fs) (layerprobe_engine_info{%(sel)s, engine=~\"$engine\"})"), "__auto", refId="F", instant=true, format="table"),
        ],
      },
      g.row(26, "Fleet: drivers, kernels and hosts that pay the most", y=60),
      mergedTable(
        27,
        "Overhead by storage driver ($target)",
        "The spread of the steady overheads over every engine of each storage driver in the selected cluster and job (the fleet recording rules over all instances: the instance and engine selections do not apply): median, 90th percentile and worst fsync p99 overhead of the $target target, median random 4 KiB write IOPS overhead (the copy-on-write cost of the layer for data), and the number of engines. 0.5 = 50% slower than the host.",
        g.pos(x=0, y=61, w=12, h=8),
        'percentunit',
        [
          g.target(q("max by (driver) (job_driver_target:layerprobe_overhead_ratio:quantile{%(fleet)s, quantile=\"0.5\", mode=~\"steady|\", target=\"$target\", workload=\"fsync\", metric=\"fsync_p99\"})"), "__auto", instant=true, format="table"),
          g.target(q("max by (driver) (job_driver_target:layerprobe_overhead_ratio:quantile{%(fleet)s, quantile=\"0.9\", mode=~\"steady|\", target=\"$target\", workload=\"fsync\", metric=\"fsync_p99\"})"), "__auto", refId="B", instant=true, format="table"),
          g.target(q("max by (driver) (job_driver_target:layerprobe_overhead_ratio:max{%(fleet)s, mode=~\"steady|\", target=\"$target\", workload=\"fsync\", metric=\"fsync_p99\"})"), "__auto", refId="C", instant=true, format="table"),
          g.target(q("max by (driver) (job_driver_target:layerprobe_overhead_ratio:quantile{%(fleet)s, quantile=\"0.5\", mode=~\"steady|\", target=\"$target\", workload=\"randwrite\", metric=\"iops\"})"), "__auto", refId="D", instant=true, format="table"),
          g.target(q("sum by (driver) (job_driver_target:layerprobe_overhead_ratio:count{%(fleet)s, mode=~\"steady|\", target=\"$target\", workload=\"fsync\", metric=\"fsync_p99\"})"), "__auto", refId="E", instant=true, format="table"),
        ],
        { 'Value #A': 'fsync p99 median', 'Value #B': 'fsync p99 p90', 'Value #C': 'fsync p99 worst', 'Value #D': 'random write IOPS median', 'Value #E': 'engines' },
        ['driver', 'Value #A', 'Value #B', 'Value #C', 'Value #D', 'Value #E'],
        sortBy='fsync p99 median',
      ) + unitOf('engines', 'short'),
      mergedTable(
        28,
        "Overhead by kernel and storage driver ($target)",
        "The same spread per kernel release and driver. The kernel is node_exporter's node_uname_info release, joined on the host name (the instance without its port): a host without node_exporter, or whose node_exporter instance names it otherwise, reads \"unknown\" (its kernel is not known). Median and 90th percentile fsync p99 overhead, median random write IOPS overhead, engines.",
        g.pos(x=12, y=61, w=12, h=8),
        'percentunit',
        [
          g.target(q("max by (release, driver) (job_release_driver_target:layerprobe_overhead_ratio:quantile{%(fleet)s, quantile=\"0.5\", target=\"$target\", workload=\"fsync\", metric=\"fsync_p99\"})"), "__auto", instant=true, format="table"),
          g.target(q("max by (release, driver) (job_release_driver_target:layerprobe_overhead_ratio:quantile{%(fleet)s, quantile=\"0.9\", target=\"$target\", workload=\"fsync\", metric=\"fsync_p99\"})"), "__auto", refId="B", instant=true, format="table"),
          g.target(q("max by (release, driver) (job_release_driver_target:layerprobe_overhead_ratio:quantile{%(fleet)s, quantile=\"0.5\", target=\"$target\", workload=\"randwrite\", metric=\"iops\"})"), "__auto", refId="C", instant=true, format="table"),
          g.target(q("sum by (release, driver) (job_release_driver_target:layerprobe_overhead_ratio:count{%(fleet)s, target=\"$target\", workload=\"fsync\", metric=\"fsync_p99\"})"), "__auto", refId="D", instant=true, format="table"),
        ],
        { 'Value #A': 'fsync p99 median', 'Value #B': 'fsync p99 p90', 'Value #C': 'random write IOPS median', 'Value #D': 'engines', release: 'kernel' },
        ['release', 'driver', 'Value #A', 'Value #B', 'Value #C', 'Value #D'],
        sortBy='fsync p99 median',
      ) + unitOf('engines', 'short'),
      mergedTable(
        29,
        "Hosts that pay the most: fsync and the container layer ($target)",
        "The 25 engines with the highest steady fsync p99 overhead in the $target target, with their kernel (\"unknown\" without node_exporter), driver, and random 4 KiB write IOPS and sequential write bandwidth overheads. Click a host for its detail.",
        g.pos(x=0, y=69, w=18, h=9),
        'percentunit',
        [
          g.target(q("topk(25, instance_engine_target:layerprobe_overhead_ratio:kernel{%(sel)s, engine=~\"$engine\", target=\"$target\", workload=\"fsync\", metric=\"fsync_p99\"})"), "__auto", instant=true, format="table"),
          g.target(q("instance_engine_target:layerprobe_overhead_ratio:kernel{%(sel)s, engine=~\"$engine\", target=\"$target\", workload=\"randwrite\", metric=\"iops\"} and on (job, instance, engine) topk(25, instance_engine_target:layerprobe_overhead_ratio:kernel{%(sel)s, engine=~\"$engine\", target=\"$target\", workload=\"fsync\", metric=\"fsync_p99\"})"), "__auto", refId="B", instant=true, format="table"),
          g.target(q("instance_engine_target:layerprobe_overhead_ratio:kernel{%(sel)s, engine=~\"$engine\", target=\"$target\", workload=\"seqwrite\", metric=\"bandwidth\"} and on (job, instance, engine) topk(25, instance_engine_target:layerprobe_overhead_ratio:kernel{%(sel)s, engine=~\"$engine\", target=\"$target\", workload=\"fsync\", metric=\"fsync_p99\"})"), "__auto", refId="C", instant=true, format="table"),
        ],
        { 'Value #A': 'fsync p99', 'Value #B': 'random write IOPS', 'Value #C': 'sequential write bandwidth', release: 'kernel' },
        ['instance', 'engine', 'driver', 'release', 'Value #A', 'Value #B', 'Value #C'],
        hide=['workload', 'metric', 'target', 'mode', 'host'],
        sortBy='fsync p99',
        hostLinks=true,
      ),
      g.panel.stat + {
        id: 30,
        title: "Hosts without a known kernel",
        description: "Hosts whose steady overheads have no node_exporter node_uname_info to join (no node_exporter, or one whose instance names the host otherwise): the kernel columns read \"unknown\" for them. 0 when every host's kernel is known.",
        gridPos: g.pos(x=18, y=69, w=6, h=9),
        fieldConfig+: {
          defaults+: {
            unit: "short",
            thresholds: {
              mode: "absolute",
              steps: [{"color": "green", "value": null}, {"color": "orange", "value": 1}],
            },
            color: { mode: "thresholds" },
          },
        },
        options+: { colorMode: "background", textMode: "auto" },
        targets: [
          g.target(q("count(count by (job, instance) (instance_engine_target:layerprobe_overhead_ratio:kernel{%(sel)s, engine=~\"$engine\", release=\"unknown\"})) or vector(0)"), "__auto", instant=true),
        ],
      },
      g.row(31, "Fleet: regressions, agents that stopped reporting, databases in layers", y=78),
      mergedTable(
        32,
        "Hosts with an fsync regression in the last day",
        "Targets whose regression detector said regressed at any time in the last day (recorded every 5m), whether it still does, and how far their steady fsync p99 overhead moved against the same time a day earlier. Click a host for its detail.",
        g.pos(x=0, y=79, w=14, h=8),
        'short',
        [
          g.target(q("instance_engine_target:layerprobe_fsync_regression:max1d{%(sel)s, engine=~\"$engine\"}"), "__auto", instant=true, format="table"),
          g.target(q("instance_engine_target:layerprobe_fsync_regression:flagged{%(sel)s, engine=~\"$engine\"}"), "__auto", refId="B", instant=true, format="table"),
          g.target(q("max without (workload, metric, mode) (instance_engine_target:layerprobe_fsync_overhead:delta1d{%(sel)s, engine=~\"$engine\"}) and on (job, instance, engine, target) instance_engine_target:layerprobe_fsync_regression:max1d{%(sel)s, engine=~\"$engine\"}"), "__auto", refId="C", instant=true, format="table"),
        ],
        { 'Value #A': 'regressed in the day', 'Value #B': 'regressed now', 'Value #C': 'fsync p99 overhead change in a day' },
        ['instance', 'engine', 'driver', 'target', 'Value #A', 'Value #B', 'Value #C'],
        hostLinks=true,
      ) + unitOf('fsync p99 overhead change in a day', 'percentunit'),
      g.panel.bargauge + {
        id: 33,
        title: "Largest rise of fsync p99 overhead in a day ($target)",
        description: "The 25 engines whose steady fsync p99 overhead in the $target target rose most against the same time a day earlier (absent before a day of history): a regression the detector may not have confirmed yet. 0.2 = 20 points more overhead than a day ago.",
        gridPos: g.pos(x=14, y=79, w=10, h=8),
        fieldConfig+: {
          defaults+: {
            unit: "percentunit",
            thresholds+: {
              steps: [{ color: "green", value: null }, { color: "orange", value: 0.1 }, { color: "red", value: 0.25 }],
            },
          },
        },
        targets: [
          g.target(q("sort_desc(topk(25, instance_engine_target:layerprobe_fsync_overhead:delta1d{%(sel)s, engine=~\"$engine\", target=\"$target\"}))"), "{{instance}} {{engine}}", instant=true),
        ],
      },
      g.panel.timeseries + {
        id: 34,
        title: "Confirmed fsync regressions per storage driver",
        description: "Targets whose regression detector says regressed, per storage driver, over the time range (the fleet recording rules: the selected cluster and job, all instances).",
        gridPos: g.pos(x=0, y=87, w=12, h=8),
        fieldConfig+: { defaults+: { unit: "short" } },
        targets: [
          g.target(q("sum by (driver) (job_driver:layerprobe_fsync_regression:count{%(fleet)s})"), "{{driver}}"),
        ],
      },
      mergedTable(
        35,
        "Agents that stopped reporting",
        "Agents Prometheus scraped in the last day and does not now (no layerprobe_build_info): down, unreachable, or taken out of the scrape configuration (then listed for a day). Agents that answer but whose figures are old count under Stale engines.",
        g.pos(x=12, y=87, w=12, h=8),
        'short',
        [
          g.target(q("instance:layerprobe_agent:stopped_reporting{%(sel)s}"), "__auto", instant=true, format="table"),
        ],
        { 'Value #A': 'seen in the last day' },
        ['instance', 'job', 'Value #A'],
        hostLinks=true,
      ),
      g.panel.piechart + {
        id: 36,
        title: "Databases in writable layers, by kind",
        description: "Top containers (advisor.metrics_top_n per engine) of a known database or queue whose data directory is on no volume or bind mount, per database, over the selected cluster and job. The table beside counts all of them, top or not, per host.",
        gridPos: g.pos(x=0, y=95, w=10, h=8),
        targets: [
          g.target(q("sum by (database) (job_database:layerprobe_container_database_in_layer:count{%(fleet)s})"), "{{database}}", instant=true),
        ],
      },
      mergedTable(
        37,
        "Hosts with databases in their writable layer",
        "Per host and engine: containers of a known database or queue keeping their data in the writable layer (all of them, layerprobe_databases_in_layer). Click a host for its detail; LayerprobeDatabaseInWritableLayer alerts on them.",
        g.pos(x=10, y=95, w=14, h=8),
        'short',
        [
          g.target(q("sort_desc(layerprobe_databases_in_layer{%(sel)s, engine=~\"$engine\"} > 0)"), "__auto", instant=true, format="table"),
        ],
        { 'Value #A': 'databases in the layer' },
        ['instance', 'engine', 'Value #A'],
        hostLinks=true,
      ),
    ],
  )
