// layerprobe's monitoring mixin: Prometheus recording rules and alerts,
// and Grafana dashboards, configured through _config (config.libsonnet).
(import 'config.libsonnet') +
(import 'rules/rules.libsonnet') +
(import 'rules/fleet.libsonnet') +
(import 'alerts/alerts.libsonnet') +
(import 'dashboards/dashboards.libsonnet') +
// The Host detail dashboard's small-file and start-up row, kept in a file
// of its own.
{
  grafanaDashboards+:: {
    'layerprobe-host.json'+: { panels+: (import 'dashboards/smallfiles.libsonnet')($._config) },
  },
}
