# Sourced by scripts/counters_bench.sh and scripts/zoo_ncu.sh: the metrics kprof replays
# (src/format/metrics.cpp, ReplayMetrics) under the names ncu takes, for `ncu --metrics`.
NCU_REPLAY_METRICS=gpu__time_duration.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed,\
gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed,\
dram__throughput.avg.pct_of_peak_sustained_elapsed,lts__throughput.avg.pct_of_peak_sustained_elapsed,\
sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,\
sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active,\
sm__warps_active.avg.pct_of_peak_sustained_active,sm__sass_thread_inst_executed_op_ffma_pred_on.sum,\
dram__bytes.sum
export NCU_REPLAY_METRICS
