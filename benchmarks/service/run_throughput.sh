#!/usr/bin/env bash
# Candidates evaluated per hour by the whole service, and where the time goes.
#
# Starts a redis-server (append-only), forge-coordinator and one forge-worker, submits exported
# models with budgets larger than their search spaces, lets the service run for DURATION seconds,
# then reads the jobs' progress and both processes' /metrics: candidates per hour, and time per
# candidate in each stage (worker: generate, compile, judge, time or predict, RPC; coordinator:
# time answering WorkerService calls, which is mostly its Redis round trips).
#
#   benchmarks/service/run_throughput.sh BIN_DIR MODELS_DIR OUT_DIR [emulated|gpu]
#
# BIN_DIR holds forge-coordinator, forge-worker, forge (and forge-sandbox-child for gpu) and
# redis-server (or it is on PATH). MODELS_DIR holds exported models (graph.pb + blobs/), e.g. the
# test fixtures (build/test_models). Environment: DURATION (s, default 60), COMPILE_THREADS
# (default: cores - 1), MODELS (default: the small models below); RESULTS_MODEL=NAME then also
# submits that model with the coordinator's default budget, waits, and writes its result bundle
# (forge results -o) to OUT_DIR/bundle.
set -euo pipefail
bin="$(cd "$1" && pwd)"; models_dir="$(cd "$2" && pwd)"; out="$3"; mode="${4:-emulated}"
duration="${DURATION:-60}"
threads="${COMPILE_THREADS:-$(( $(nproc) > 1 ? $(nproc) - 1 : 1 ))}"
models="${MODELS:-llama_block mlp softmax layer_norm_gelu cross_entropy mixed_precision_softmax linear_mul_leaky_relu}"  # names in MODELS_DIR (export dirs or .pt2 files)
mkdir -p "$out"
work="$(mktemp -d)"
redis_bin="$bin/redis-server"; [ -x "$redis_bin" ] || redis_bin="$(command -v redis-server)"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
redis_port="$(free_port)"; grpc_port="$(free_port)"; coordinator_metrics="$(free_port)"; worker_metrics="$(free_port)"
pids=()
cleanup() { for pid in "${pids[@]}"; do kill -9 "$pid" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT

"$redis_bin" --port "$redis_port" --bind 127.0.0.1 --dir "$work" --appendonly yes --save "" \
  >"$out/redis.log" 2>&1 & pids+=($!)
"$bin/forge-coordinator" --listen="127.0.0.1:$grpc_port" --redis.port="$redis_port" \
  --blobs.dir="$work/blobs" --metrics.listen="127.0.0.1:$coordinator_metrics" \
  --search.trials-per-task=100000 --lease.max-candidates=64 >"$out/coordinator.log" 2>&1 & pids+=($!)
worker_flags=(--coordinator="127.0.0.1:$grpc_port" --compile-threads="$threads"
              --metrics.port="$worker_metrics" --metrics.host=127.0.0.1
              --compile-cache-dir="$work/cubins")
if [ "$mode" = emulated ]; then worker_flags+=(--emulate=H200); else worker_flags+=(--sandbox-child="$bin/forge-sandbox-child"); fi
"$bin/forge-worker" "${worker_flags[@]}" >"$out/worker.log" 2>&1 & pids+=($!)
for _ in $(seq 100); do
  (exec 3<>"/dev/tcp/127.0.0.1/$grpc_port") 2>/dev/null && break; sleep 0.1
done

export FORGE_SERVER="127.0.0.1:$grpc_port"
jobs=()
start="$(date +%s.%N)"
for model in $models; do
  jobs+=("$("$bin/forge" submit "$models_dir/$model" --budget 100000 --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["jobs"][0]["job"]["id"])')")
done
sleep "$duration"
end="$(date +%s.%N)"
for job in "${jobs[@]}"; do "$bin/forge" status "$job" --json; done >"$out/jobs.jsonl"
curl -s "http://127.0.0.1:$worker_metrics/metrics" >"$out/worker.metrics"
curl -s "http://127.0.0.1:$coordinator_metrics/metrics" >"$out/coordinator.metrics"
"$bin/forge" workers --json >"$out/workers.json"

for job in "${jobs[@]}"; do
  "$bin/forge" cancel "$job" --reason "throughput window over" >/dev/null 2>&1 || true  # done ones refuse
done
if [ -n "${RESULTS_MODEL:-}" ]; then
  results_job="$("$bin/forge" submit "$models_dir/$RESULTS_MODEL" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["jobs"][0]["job"]["id"])')"
  timeout "${RESULTS_TIMEOUT:-300}" "$bin/forge" watch "$results_job" --plain >"$out/results_watch.log" 2>&1 || true
  "$bin/forge" results "$results_job" -o "$out/bundle" >"$out/results.log" 2>&1 || true
fi

python3 - "$out" "$start" "$end" "$mode" "$threads" <<'PY'
import collections, datetime, json, re, sys
out, start, end, mode, threads = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), sys.argv[4], sys.argv[5]
text, jobs, at = open(f"{out}/jobs.jsonl").read(), [], 0
while text[at:].strip():  # one pretty-printed JSON object per job, back to back
    at += len(text[at:]) - len(text[at:].lstrip())
    job, at = json.JSONDecoder().raw_decode(text, at)
    jobs.append(job)
# When every job ended inside the window, the work took until the last one ended.
stamp = lambda text: datetime.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
if jobs and all(j["state"] == "JOB_STATE_DONE" for j in jobs):
    end = min(end, max(stamp(j["updated_at"]) for j in jobs))
wall = end - start
def progress(job, key):
    return int(job.get("progress", {}).get(key, 0))
done = sum(progress(j, "candidates_completed") + progress(j, "candidates_failed") for j in jobs)
failed = sum(progress(j, "candidates_failed") for j in jobs)
def sums(path, family):
    total = collections.Counter()
    for line in open(path):
        m = re.match(family + r'_sum\{([^}]*)\} (\S+)', line)
        if m:
            labels = dict(kv.split("=", 1) for kv in m.group(1).split(","))
            total[labels.get("stage", labels.get("method", "")).strip('"')] += float(m.group(2))
    return total
worker = sums(f"{out}/worker.metrics", "forge_worker_stage_seconds")
coordinator = sums(f"{out}/coordinator.metrics", "forge_coordinator_worker_rpc_seconds")
per = lambda seconds: 1e3 * seconds / done if done else 0.0
rows = [(f"worker: {stage}", per(s)) for stage, s in sorted(worker.items())]
rows += [(f"coordinator: {method} (Redis + scheduling)", per(s)) for method, s in sorted(coordinator.items())]
result = {"mode": mode, "compile_threads": int(threads), "wall_seconds": round(wall, 1),
          "jobs_done": sum(j["state"] == "JOB_STATE_DONE" for j in jobs), "jobs": len(jobs),
          "candidates": done, "failed": failed,
          "candidates_per_hour": round(done / wall * 3600) if wall > 0 else 0,
          "ms_per_candidate": {name: round(v, 3) for name, v in rows}}
json.dump(result, open(f"{out}/throughput.json", "w"), indent=2)
with open(f"{out}/throughput.md", "w") as md:
    md.write(f"mode {mode}, {threads} compile threads, {wall:.1f} s, {result['jobs_done']} of "
             f"{len(jobs)} jobs done: {done} candidates ({failed} failed) = "
             f"**{result['candidates_per_hour']:,} candidates/hour**\n\n")
    md.write("| where | ms per candidate (summed over threads) |\n|---|---:|\n")
    for name, v in rows:
        md.write(f"| {name} | {v:.3f} |\n")
print(open(f"{out}/throughput.md").read())
PY
