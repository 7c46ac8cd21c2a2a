// Everything a user of the mixin may want to change. Override it in your
// own jsonnet:
//
//   (import 'layerprobe-mixin/mixin.libsonnet') + {
//     _config+:: { layerprobeSelector: 'job="layerprobe"', agentInterval: '2h' },
//   }
//
// mixin/README.md describes every field.
{
  _config+:: {
    // Label matchers that select layerprobe's series in the rules and
    // alerts, e.g. 'job="layerprobe"'. Empty: every layerprobe_* series.
    layerprobeSelector: '',

    // The label that tells clusters (or Prometheus replicas, regions) apart
    // in a Prometheus that sees several: Thanos, Mimir, federation. The
    // rules keep it in their joins; the dashboards get a variable for it.
    clusterLabel: 'cluster',
    // Show the cluster variable on the dashboards. With false it is hidden
    // and matches everything.
    showMultiCluster: true,

    // Label matchers that select node_exporter's node_uname_info, whose
    // release label (the kernel) the fleet rules join to each host, e.g.
    // 'job="node"'. Empty: every node_uname_info series.
    nodeExporterSelector: '',
    // The fleet rules join node_exporter to layerprobe on the host: the
    // instance label without its port (host-1:9100 and host-1:9811 are
    // both host-1). A regex with one capture group, anchored by PromQL.
    hostFromInstanceRegex: '(.+?)(?::[0-9]+)?',
    // The label of node_uname_info that names the host as Kubernetes
    // does: uname -n, the node name unless the kubelet overrides it. The
    // chart names the agent's target after the node, while
    // kube-prometheus-stack's node-exporter keeps its instance as
    // IP:9100; the fleet rules join on this label too, the instance
    // winning where both match. Empty: the instance only.
    nodeExporterNodenameLabel: 'nodename',
    // Evaluation interval of the fleet recording rules. The agents publish
    // new figures once a cycle (6h); 5m keeps the fleet views fresh and
    // the rules' cost a fifth of a 1m evaluation.
    fleetRulesInterval: '5m',
    // Evaluation interval of the recording rules that rules over days
    // read (the day's share of successful cycles, the stale alert's last
    // success of agents gone away): an hour's lag is nothing next to a
    // 6h cycle, and a day of them is 24 samples.
    hourlyRulesInterval: '1h',

    // The agent's cycle interval (agent.interval). Everything below that
    // waits for "two cycles" is derived from it.
    agentIntervalHours: 6,
    // A steady figure older than this many intervals is stale: two missed
    // cycles plus the scheduler's jitter and a cycle's duration.
    staleIntervals: 2.5,

    // LayerprobeFsyncOverheadHigh: the lower bound of the 95% interval of
    // the fsync p99 overhead of container or volume is above this
    // (0.5 = 50% slower than the host).
    fsyncOverheadAlertLevel: 0.5,
    // LayerprobeColdFsyncOverheadHigh: the same for a freshly started
    // container's writable layer (1 = twice the host's latency).
    coldFsyncOverheadAlertLevel: 1,
    // LayerprobeSlowStorageDriver: storage drivers that copy every layer
    // in full or are deprecated.
    slowStorageDrivers: 'vfs|devicemapper|aufs',

    // for: durations. Two cycles' worth of evidence by default (2 x 6h);
    // the stale alerts need only persist across scrapes.
    fsyncRegressionFor: '%dh' % (2 * self.agentIntervalHours),
    fsyncOverheadFor: '%dh' % (2 * self.agentIntervalHours),
    agentStaleFor: '30m',
    agentNeverSucceededFor: '%dh' % (self.staleIntervals * self.agentIntervalHours),
    cyclesFailingFor: '%dh' % (2 * self.agentIntervalHours),
    coldFsyncOverheadFor: '1h',
    budgetExhaustedFor: '%dh' % (2 * self.agentIntervalHours),
    slowStorageDriverFor: '%dh' % (2 * self.agentIntervalHours),
    // The join is checked once per probe container (at start and after a
    // restart): an hour rides out scrape gaps and is far shorter than a cycle.
    hostArmOutsideFor: '1h',
    databaseInLayerFor: '%dh' % (2 * self.agentIntervalHours),

    // Severity label of every alert, and where the runbook lives.
    alertSeverity: 'warning',
    runbookURLPattern: 'https://github.com/layerprobe/layerprobe/blob/main/docs/runbook.md#%s',

    // Dashboards.
    dashboardTags: ['layerprobe', 'storage', 'docker'],
    dashboardRefresh: '5m',
    dashboardTimezone: '',
    // Grafana's text for "every value" of the cluster, job and instance
    // variables (a regex: it must also match a series without the label).
    allValue: '.*',
  },
}
