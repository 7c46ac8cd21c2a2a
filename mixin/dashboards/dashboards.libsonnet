// The Grafana dashboards, by file name (dashboards/ holds them built with
// the default _config).
{
  grafanaDashboards+:: {
    'layerprobe-fleet.json': (import 'fleet.libsonnet')($._config),
    'layerprobe-host.json': (import 'host.libsonnet')($._config),
  },
}
