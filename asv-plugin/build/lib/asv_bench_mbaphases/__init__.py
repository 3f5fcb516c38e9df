"""asv_runner loads benchmark types from installed distributions named asv_bench*
(their ``benchmarks`` submodules' ``export_as_benchmark``)."""
