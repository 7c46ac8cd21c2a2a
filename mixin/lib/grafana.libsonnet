// Builders for the dashboards: the panel types with the options every
// panel of a type shares, targets, variables and the dashboard itself.
// Only core panels of Grafana 10.4+ (schema version 39).
local promql = import 'promql.libsonnet';

local datasource = { type: 'prometheus', uid: '${datasource}' };
local panel(type) = { type: type, datasource: datasource };

{
  datasource:: datasource,

  pos(x, y, w, h):: { h: h, w: w, x: x, y: y },

  // needsDetail marks a panel that reads series the agent exposes only
  // with agent.metrics_detail: true (docs/metrics.md): when the lean
  // default leaves it empty, it says so instead of "No data" (its
  // description says what the default shows of it).
  needsDetail:: {
    fieldConfig+: { defaults+: { noValue: 'needs agent.metrics_detail: true' } },
  },

  row(id, title, y):: {
    id: id,
    type: 'row',
    title: title,
    collapsed: false,
    gridPos: $.pos(0, y, 24, 1),
    panels: [],
  },

  // A Prometheus query, instant or over the dashboard's time range.
  // interval is the query's min step ("1h" for a series recorded once an
  // hour): Grafana then takes it as the scrape interval, so that
  // $__rate_interval is at least four of them.
  target(expr, legend, refId='A', instant=false, format=null, interval=null):: {
    datasource: datasource,
    editorMode: 'code',
    expr: expr,
    instant: instant,
    range: !instant,
    legendFormat: legend,
    refId: refId,
  } + (if format != null then { format: format } else {})
  + (if interval != null then { interval: interval } else {}),

  // query(c) returns the function that fills the agent selector into a
  // panel's expression: %(sel)s becomes the cluster, job and instance
  // matchers, %(fleet)s the cluster and job matchers alone (for the fleet
  // recording rules, which aggregate instances away). (A literal % in
  // PromQL is written %%.)
  query(c):: function(expr) expr % { sel: $.agentMatchers(c), fleet: $.fleetMatchers(c) },

  fleetMatchers(c):: promql.matchers([
    if c.showMultiCluster then '%s=~"$cluster"' % c.clusterLabel else '',
    'job=~"$job"',
  ]),

  agentMatchers(c):: promql.matchers([
    if c.showMultiCluster then '%s=~"$cluster"' % c.clusterLabel else '',
    'job=~"$job"',
    'instance=~"$instance"',
  ]),

  // Variables.
  variable:: {
    datasource: {
      type: 'datasource',
      name: 'datasource',
      label: 'Data source',
      query: 'prometheus',
      current: {},
      hide: 0,
      includeAll: false,
      multi: false,
      options: [],
      refresh: 1,
      regex: '',
      skipUrlSync: false,
    },

    // label_values(metric{matchers}, label), refreshed with the time range.
    query(name, label, metric, matchers, labelName, multi=true):: {
      local q = 'label_values(%s, %s)' % [promql.series(metric, matchers), labelName],
      type: 'query',
      name: name,
      label: label,
      datasource: datasource,
      definition: q,
      query: { query: q, refId: 'StandardVariableQuery' },
      current: {},
      hide: 0,
      multi: multi,
      includeAll: multi,
      options: [],
      refresh: 2,
      regex: '',
      sort: 1,
      skipUrlSync: false,
    } + (if multi then { allValue: '.+' } else {}),

    // The cluster, job and instance variables every dashboard starts with.
    agent(c, multiInstance):: [
      $.variable.query('cluster', 'Cluster', 'layerprobe_build_info', [c.layerprobeSelector], c.clusterLabel) + {
        // ".*" also matches a Prometheus without the label.
        allValue: c.allValue,
        hide: if c.showMultiCluster then 0 else 2,
      },
      $.variable.query('job', 'Job', 'layerprobe_build_info',
                       [c.layerprobeSelector, if c.showMultiCluster then '%s=~"$cluster"' % c.clusterLabel else ''], 'job'),
      $.variable.query('instance', 'Instance', 'layerprobe_build_info',
                       [if c.showMultiCluster then '%s=~"$cluster"' % c.clusterLabel else '', 'job=~"$job"'], 'instance', multi=multiInstance),
      $.variable.query('engine', 'Engine', 'layerprobe_engine_info', [$.agentMatchers(c)], 'engine'),
    ],
  },

  dashboard(c, uid, title, description, from, variables, panels):: {
    annotations: {
      list: [{
        builtIn: 1,
        datasource: { type: 'grafana', uid: '-- Grafana --' },
        enable: true,
        hide: true,
        iconColor: 'rgba(0, 211, 255, 1)',
        name: 'Annotations & Alerts',
        type: 'dashboard',
      }],
    },
    description: description,
    // Provisioned dashboards: change the mixin, not the UI.
    editable: false,
    fiscalYearStartMonth: 0,
    graphTooltip: 1,
    id: null,
    links: [{
      type: 'dashboards',
      tags: ['layerprobe'],
      asDropdown: false,
      includeVars: true,
      keepTime: true,
      title: 'layerprobe dashboards',
      icon: 'external link',
      targetBlank: false,
      tooltip: '',
      url: '',
    }],
    panels: panels,
    refresh: c.dashboardRefresh,
    schemaVersion: 39,
    tags: c.dashboardTags,
    templating: { list: [$.variable.datasource] + variables },
    time: { from: from, to: 'now' },
    timepicker: {},
    timezone: c.dashboardTimezone,
    title: title,
    uid: uid,
    version: 1,
    weekStart: '',
  },

  // The panel types, with what all panels of a type share.
  panel:: {
    stat: panel("stat") + {
      fieldConfig: {
        defaults: {},
        overrides: [],
      },
      options: {
        reduceOptions: {
          calcs: ["lastNotNull"],
          fields: "",
          values: false,
        },
        graphMode: "none",
        justifyMode: "auto",
        orientation: "auto",
      },
    },
    bargauge: panel("bargauge") + {
      fieldConfig: {
        defaults: {
          thresholds: {
            mode: "absolute",
          },
          color: {
            mode: "thresholds",
          },
        },
        overrides: [],
      },
      options: {
        reduceOptions: {
          calcs: ["lastNotNull"],
          fields: "",
          values: false,
        },
        orientation: "horizontal",
        displayMode: "basic",
        showUnfilled: true,
        valueMode: "color",
        namePlacement: "left",
        sizing: "auto",
      },
    },
    table: panel("table") + {
      fieldConfig: {
        defaults: {
          custom: {
            align: "auto",
            cellOptions: {
              type: "auto",
            },
            filterable: true,
          },
        },
      },
      options: {
        showHeader: true,
        cellHeight: "sm",
        footer: {
          show: false,
          reducer: ["sum"],
          fields: "",
        },
      },
    },
    piechart: panel("piechart") + {
      fieldConfig: {
        defaults: {
          unit: "short",
        },
        overrides: [],
      },
      options: {
        reduceOptions: {
          calcs: ["lastNotNull"],
          fields: "",
          values: false,
        },
        pieType: "donut",
        displayLabels: ["name", "value"],
        legend: {
          displayMode: "table",
          placement: "right",
          showLegend: true,
          values: ["value"],
        },
        tooltip: {
          mode: "single",
          sort: "none",
        },
      },
    },
    timeseries: panel("timeseries") + {
      fieldConfig: {
        defaults: {
          custom: {
            drawStyle: "line",
            lineWidth: 1,
            fillOpacity: 0,
            showPoints: "auto",
            spanNulls: true,
            lineInterpolation: "stepAfter",
          },
        },
      },
      options: {
        legend: {
          displayMode: "table",
          placement: "bottom",
          showLegend: true,
        },
        tooltip: {
          mode: "multi",
          sort: "desc",
        },
      },
    },
    state_timeline: panel("state-timeline") + {
      fieldConfig: {
        defaults: {
          unit: "none",
          mappings: [
            {
              type: "value",
              options: {
                "0": {
                  text: "baseline",
                  color: "green",
                  index: 0,
                },
                "1": {
                  text: "regressed",
                  color: "red",
                  index: 1,
                },
              },
            },
          ],
          color: {
            mode: "thresholds",
          },
          thresholds: {
            mode: "absolute",
            steps: [{"color": "green", "value": null}, {"color": "red", "value": 1}],
          },
        },
        overrides: [],
      },
      options: {
        showValue: "auto",
        mergeValues: true,
        alignValue: "left",
        rowHeight: 0.9,
        legend: {
          displayMode: "list",
          placement: "bottom",
          showLegend: true,
        },
        tooltip: {
          mode: "single",
          sort: "none",
        },
      },
    },  },
}
