#!/usr/bin/env bash
# Node-level tracing of a PyTorch torch.cuda.graph replay (issue 10): plain, kprof --graph-trace node
# with several agent settings, and nsys --cuda-graph-trace=node, three interleaved rounds. Needs a
# GPU and a build in build/. Output: measurements/h100-2026-11-23-issue10/torch_node_variants.txt
NSYS=$(ls /opt/nvidia/nsight-compute/*/host/target-linux-x64/nsys 2>/dev/null | head -n 1)
T="python3 tests/gpu/scripts/torch_graph.py 200"
for r in 1 2 3; do
  echo "plain $r $($T | grep -o 'replay_us=[0-9.]*')"
  echo "A-default $r $(build/kprof run -q --force --graph-trace node -o /tmp/a -- $T | grep -o 'replay_us=[0-9.]*')"
  echo "B-no-driver-mem-sync-overhead $r $(build/kprof run -q --force --graph-trace node --kinds kernel,memcpy,memset,runtime,nvtx -o /tmp/b -- $T | grep -o 'replay_us=[0-9.]*')"
  echo "C-devbuf32 $r $(KPROF_DEVICE_BUFFER_MB=32 build/kprof run -q --force --graph-trace node -o /tmp/c -- $T | grep -o 'replay_us=[0-9.]*')"
  echo "D-kernel-only $r $(build/kprof run -q --force --graph-trace node --kinds kernel -o /tmp/d -- $T | grep -o 'replay_us=[0-9.]*')"
  echo "E-no-graph-names $r $(KPROF_GRAPH_NAMES=0 build/kprof run -q --force --graph-trace node -o /tmp/e -- $T | grep -o 'replay_us=[0-9.]*')"
  echo "F-nsys-node $r $(timeout 120 $NSYS profile -t cuda,nvtx --cuda-graph-trace=node --sample=none --cpuctxsw=none -o /tmp/nsn -f true $T 2>/dev/null | grep -o 'replay_us=[0-9.]*')"
done
