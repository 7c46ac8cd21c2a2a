// Alerts. Every one links its section of docs/runbook.md. The agent's
// values change once per cycle, so every alert waits for two cycles' worth
// of evidence (_config's for: durations) or compares an age with
// staleIntervals intervals. Values are cached between cycles, and a failed
// scrape makes them stale for a moment: long for: clauses therefore look
// at min_over_time(...[30m]), so that a gap of a few scrapes does not reset
// a pending alert. Rules about steady state select mode=~"steady|": the
// steady results, and those of agents from before the mode label.
local promql = import '../lib/promql.libsonnet';

{
  prometheusAlerts+:: {
    local c = $._config,
    local s(metric, matchers=[]) = promql.series(metric, [c.layerprobeSelector] + matchers),
    local staleSeconds = c.staleIntervals * c.agentIntervalHours * 3600,
    // "twice" for a cold level of 1 (target/host - 1 > 1), "3 times" for 2.
    local coldFactor = if c.coldFsyncOverheadAlertLevel == 1 then 'twice' else '%s times' % (1 + c.coldFsyncOverheadAlertLevel),
    local alert(name, expr, forDuration, summary, description, severity=c.alertSeverity) = {
      alert: name,
      expr: expr,
      'for': forDuration,
      labels: { severity: severity },
      annotations: {
        summary: summary,
        description: std.rstripChars(description, '\n'),
        runbook_url: c.runbookURLPattern % std.asciiLower(name),
      },
    },

    groups+: [
      // Two groups, so that neither evaluates every alert over the whole
      // fleet: the overheads (the detector's and the agent's figures)
      // here, the agents' own state in layerprobe.alerts.agents.
      {
        name: 'layerprobe.alerts',
        rules: [
          // The level above which LayerprobeFsyncOverheadHigh fires, as a
          // series, so that it can be changed (and looked at) in one place.
          {
            record: 'layerprobe:fsync_overhead_alert_level:ratio',
            expr: 'vector(%s)' % c.fsyncOverheadAlertLevel,
          },

          // The detector already confirms a regression with fresh rounds;
          // the for: makes sure it is still flagged two cycles later.
          alert(
            'LayerprobeFsyncRegression',
            |||
              min_over_time(%s[30m]) == 1
            ||| % s('layerprobe_fsync_regression'),
            c.fsyncRegressionFor,
            'fsync latency in a container storage path has regressed against its baseline.',
            |||
              layerprobe on {{ $labels.instance }} (engine {{ $labels.engine }}, driver {{ $labels.driver }}) has flagged a regression of fsync p99 in the {{ $labels.target }} target against that target's own baseline for at least two measurement cycles.
            |||,
          ),

          // Even the lower 95% bound is above the level: noise alone does
          // not explain it. bind is left out (it is the host directory).
          alert(
            'LayerprobeFsyncOverheadHigh',
            |||
              min_over_time(
                %s[30m]
              )
                > on () group_left ()
              layerprobe:fsync_overhead_alert_level:ratio
            ||| % s('layerprobe_overhead_ci_low_ratio', ['mode=~"steady|"', 'workload="fsync"', 'metric="fsync_p99"', 'target=~"container|volume"']),
            c.fsyncOverheadFor,
            'fsync in a container storage path is much slower than on the host.',
            |||
              On {{ $labels.instance }} (engine {{ $labels.engine }}, driver {{ $labels.driver }}) fsync p99 in the {{ $labels.target }} target is at least {{ $value | humanizePercentage }} slower than on the host (lower bound of the 95% interval), above the alert level, for at least two measurement cycles.
            |||,
          ),

          // The lower bound of the cold overhead (target/host - 1) is above
          // the level with 95% confidence. Cold cycles run every
          // agent.cold_interval and each publication already is a window
          // over the recent cold rounds; the for: only makes the value
          // persist across scrapes.
          alert(
            'LayerprobeColdFsyncOverheadHigh',
            |||
              min_over_time(
                %s[30m]
              ) > %s
            ||| % [s('layerprobe_overhead_ci_low_ratio', ['mode="cold"', 'workload="fsync"', 'metric="fsync_p99"', 'target="container"']), c.coldFsyncOverheadAlertLevel],
            c.coldFsyncOverheadFor,
            'fsync in a freshly started container is at least %s as slow as on the host.' % coldFactor,
            |||
              On {{ $labels.instance }} (engine {{ $labels.engine }}, driver {{ $labels.driver }}) fsync p99 in the writable layer of a freshly started container is at least {{ $value | humanizePercentage }} slower than on the host (lower bound of the 95%% interval over the recent cold rounds), i.e. more than %s the host's latency. Short-lived containers that write to their writable layer pay this.
            ||| % coldFactor,
          ),
        ],
      },
      {
        name: 'layerprobe.alerts.agents',
        rules: [
          // The second branch keeps the alert alive when the agent itself
          // has gone (its last timestamp, up to 7 days old, unless the
          // agent still answers). It reads the hourly maximum that
          // layerprobe.recording.hourly records (168 samples per engine
          // for 7 days, not the 10k scraped ones). Until the next hourly
          // evaluation after an agent went away, its last success in the
          // hour it went is not recorded yet: an older one is, so the alert
          // can fire up to an hour early, and only for an agent already
          // near the threshold. Steady cycles only: cold cycles are rarer and have no
          // bearing on how old the steady figures are. `max without
          // (mode)` keeps one alert per engine across an upgrade that adds
          // the mode label.
          alert(
            'LayerprobeAgentStale',
            |||
              (time() - max without (mode) (%(ts)s)) > %(stale)d
              or
              (
                time() - max_over_time(%(hourly)s[7d])
                  unless on (%(cluster)s, job, instance)
                %(build)s
              ) > %(stale)d
            ||| % {
              ts: s('layerprobe_last_success_timestamp_seconds', ['mode=~"steady|"']),
              hourly: s('engine:layerprobe_last_success_timestamp_seconds:max1h'),
              build: s('layerprobe_build_info'),
              stale: staleSeconds,
              cluster: c.clusterLabel,
            },
            c.agentStaleFor,
            'layerprobe has not completed a measurement cycle for more than two intervals.',
            |||
              The last successful layerprobe cycle of engine {{ $labels.engine }} on {{ $labels.instance }} ended {{ $value | humanizeDuration }} ago. Its overhead figures are that old too.
            |||,
          ),

          // An engine without any successful steady cycle has no steady
          // timestamp series at all, so LayerprobeAgentStale cannot see it.
          // A successful cold cycle does not count.
          alert(
            'LayerprobeAgentNeverSucceeded',
            |||
              count without (driver, backing_fs, engine_version, data_root, fio_version) (
                max_over_time(%s[30m])
              ) > 0
                unless on (%s, job, instance, engine)
              %s
            ||| % [s('layerprobe_engine_info'), c.clusterLabel, s('layerprobe_last_success_timestamp_seconds', ['mode=~"steady|"'])],
            c.agentNeverSucceededFor,
            'layerprobe has never completed a measurement cycle for an engine.',
            |||
              Engine {{ $labels.engine }} on {{ $labels.instance }} has been known to layerprobe for more than %s intervals without a single successful steady-state cycle.
            ||| % c.staleIntervals,
          ),

          // True while a failed cycle lies within the last two intervals;
          // held for two intervals it needs failures in at least two
          // cycles. Steady and cold cycles count together.
          alert(
            'LayerprobeCyclesFailing',
            |||
              sum without (result, mode) (increase(%s[%s])) > 0
            ||| % [s('layerprobe_cycles_total', ['result="failed"']), c.cyclesFailingFor],
            c.cyclesFailingFor,
            'layerprobe measurement cycles keep failing.',
            |||
              Engine {{ $labels.engine }} on {{ $labels.instance }} had failed layerprobe cycles in every %(w)s window for the last %(w)s ({{ $value | printf "%%.0f" }} in the last %(w)s).
            ||| % { w: c.cyclesFailingFor },
          ),

          // Same shape as LayerprobeCyclesFailing: skips in at least two
          // cycles.
          alert(
            'LayerprobeBudgetExhausted',
            |||
              sum without (reason) (increase(%s[%s])) > 0
            ||| % [s('layerprobe_cycle_skips_total', ['reason="budget_exhausted"']), c.budgetExhaustedFor],
            c.budgetExhaustedFor,
            'layerprobe skips measurement cycles because its daily write budget is used up.',
            |||
              Engine {{ $labels.engine }} on {{ $labels.instance }} skipped {{ $value | printf "%%.0f" }} cycle(s) in the last %s because agent.daily_byte_budget would have been exceeded; measurements have gaps.
            ||| % c.budgetExhaustedFor,
          ),

          // The host arm could not join the probe container's CPU cgroups:
          // on a busy host the published overheads then include CPU
          // contention, by a factor rather than a few percent.
          alert(
            'LayerprobeHostArmOutsideCPUCgroup',
            |||
              max_over_time(%s[30m]) == 0
            ||| % s('layerprobe_host_arm_cgroup_joined'),
            c.hostArmOutsideFor,
            "layerprobe's host arm cannot join the probe container's CPU cgroups: overheads on a busy host include CPU contention.",
            |||
              Engine {{ $labels.engine }} on {{ $labels.instance }}: the agent cannot write the probe container's CPU cgroups, so its host-side fio competes for CPU apart from the container's. With busy CPUs the overheads read too high; the agent's /api/v1/engines says why (host_arm_cgroup_error).
            |||,
          ),

          // The version labels are dropped: an engine or fio upgrade must
          // not restart the for:.
          alert(
            'LayerprobeSlowStorageDriver',
            |||
              max without (engine_version, fio_version) (
                max_over_time(%s[30m])
              ) == 1
            ||| % s('layerprobe_engine_info', ['driver=~"%s"' % c.slowStorageDrivers]),
            c.slowStorageDriverFor,
            'A Docker engine uses a slow or deprecated storage driver.',
            |||
              Engine {{ $labels.engine }} on {{ $labels.instance }} uses the {{ $labels.driver }} storage driver (data root {{ $labels.data_root }} on {{ $labels.backing_fs }}).
            |||,
            severity='info',
          ),

          // The layer-write advisor, which runs with every cycle, counts the
          // running containers of known databases and queues whose data
          // directory is on no volume: every write of theirs pays the
          // writable layer's cost, and their data goes with the container.
          // Two passes keep a container that only ran for a test out.
          alert(
            'LayerprobeDatabaseInWritableLayer',
            |||
              min_over_time(%s[30m]) > 0
            ||| % s('layerprobe_databases_in_layer'),
            c.databaseInLayerFor,
            'A database or queue keeps its data in a container\'s writable layer.',
            |||
              {{ $value | printf "%.0f" }} running database or queue container(s) of engine {{ $labels.engine }} on {{ $labels.instance }} keep their data directory on no volume, in the writable layer. `layerprobe advise` or GET /api/v1/containers names them and the directory to mount a volume at.
            |||,
          ),
        ],
      },
    ],
  },
}
