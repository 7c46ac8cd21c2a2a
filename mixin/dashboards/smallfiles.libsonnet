// The Host detail dashboard's small-file and container start-up row:
// panels appended after the advisor's (mixin.libsonnet), so that this file
// stays apart from the rest of the dashboard.
local g = import '../lib/grafana.libsonnet';

function(c)
  local q = g.query(c);
  [
    g.row(45, "Small files and container start-up", y=118),
    g.panel.timeseries + g.needsDetail + {
      id: 41,
      title: "Small files: overhead versus the host",
      description: "Paired overhead of the smallfiles workload (a package install's tree: 1000 files of 0-16 KiB in 200 directories, created and written, stat'ed, deleted) per target: iops is file operations per second (1 - target/host), latency_p99 their 99th percentile (target/host - 1). 0.2 = 20% slower than the host. Without agent.metrics_detail: true only iops, the workload's headline.",
      gridPos: g.pos(x=0, y=119, w=12, h=8),
      fieldConfig+: {
        defaults+: {
          unit: "percentunit",
        },
        overrides: [],
      },
      targets: [
        g.target(q("max by (target, metric) (layerprobe_overhead_ratio{%(sel)s, engine=~\"$engine\", mode=~\"steady|\", target=~\"$target\", workload=\"smallfiles\", metric=~\"iops|latency_p99\"})"), "{{target}} {{metric}}"),
      ],
    },
    g.panel.timeseries + {
      id: 42,
      title: "Container start-up time by image size",
      description: "Median time to create, start, exec once into and remove a container whose image carries image_bytes of files beyond the probe image's (agent.startup_images), from the last cold cycle (layerprobe_startup_seconds). It grows with the image on a driver that copies the image per container (vfs), not on overlay2 or btrfs.",
      gridPos: g.pos(x=12, y=119, w=12, h=8),
      fieldConfig+: {
        defaults+: {
          unit: "s",
        },
        overrides: [],
      },
      targets: [
        g.target(q("max by (engine, image_bytes) (layerprobe_startup_seconds{%(sel)s, engine=~\"$engine\"})"), "{{engine}} {{image_bytes}} B"),
      ],
    },
    g.panel.timeseries + {
      id: 43,
      title: "Bytes written per container start",
      description: "Median bytes the data root's device wrote per container start from each start-up image (layerprobe_startup_device_written_bytes): vfs on ext4 writes two copies of the image (its init layer and the container's layer), overlay2 a few MiB whatever the image.",
      gridPos: g.pos(x=0, y=127, w=12, h=8),
      fieldConfig+: {
        defaults+: {
          unit: "bytes",
        },
        overrides: [],
      },
      targets: [
        g.target(q("max by (engine, image_bytes) (layerprobe_startup_device_written_bytes{%(sel)s, engine=~\"$engine\"})"), "{{engine}} {{image_bytes}} B"),
      ],
    },
    g.panel.stat + {
      id: 44,
      title: "Start-up bytes per byte of image",
      description: "Theil-Sen slope of the bytes a container start writes over the image's bytes (layerprobe_startup_written_bytes_per_image_byte): about 1 per copy of the image a start makes (vfs on ext4: 2), about 0 where layers are stacked or extents shared (overlay2, btrfs; vfs on xfs).",
      gridPos: g.pos(x=12, y=127, w=12, h=8),
      fieldConfig+: {
        defaults+: {
          unit: "none",
          decimals: 2,
        },
      },
      targets: [
        g.target(q("max by (engine) (layerprobe_startup_written_bytes_per_image_byte{%(sel)s, engine=~\"$engine\"})"), "{{engine}}", instant=true),
      ],
    },
  ]
