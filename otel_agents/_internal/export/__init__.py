"""Where spans and metrics go: exporters, the guarded batch pipeline, the embedded store, Prometheus, exit."""
