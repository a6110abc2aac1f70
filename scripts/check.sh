#!/usr/bin/env bash
# The repository's two jobs, step by step:
#
#   scripts/check.sh test     what `make test` (and CI's .ci/run) runs
#   scripts/check.sh verify   what `make verify` runs: test's steps, then
#                             the longer checks, ending with a report table
#
# Every step runs under an explicit time limit, prints a line when it
# starts and when it ends (its result, its time, the time so far), and keeps
# its whole output in a log under one directory named before the first
# step. A failed step prints its log's last lines; the job goes on to the
# next step and fails at the end. Nothing is explored twice: the
# conformance step explores every committed TLC config once (the race step
# skips it).
set -uo pipefail
cd "$(dirname "$0")/.."
mode=${1:-test}
case $mode in test|verify) ;; *) echo "usage: $0 test|verify" >&2; exit 2 ;; esac
GO=${GO:-go}
out=${CHECK_LOG_DIR:-$(mktemp -d -t "placement-$mode.XXXXXX")}
mkdir -p "$out"
echo "check: $mode: logs in $out"
job_start=$(date +%s)
rows=()
failed=0
names=() limits=() bgs=()

# step NAME LIMIT [bg]: runs the function s_NAME (a bash function, exported
# so that timeout(1) can run it) within LIMIT, a duration for timeout(1).
# A bg step starts in its turn and runs beside the steps after it; the job
# waits for it before its report (the rows keep the steps' order).
step() { names+=("$1"); limits+=("$2"); bgs+=("${3:-}"); export -f "s_$1"; }
export GO
export peer_libs

s_gofmt() {
  local bad
  bad=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
  [ -z "$bad" ] || { echo "not gofmt-formatted:"; echo "$bad"; return 1; }
  echo "all files formatted"
}
# benchmarks/peers is a nested module (the libraries a router author would
# pick instead, kept out of the root module's go.sum): ./... at the root
# does not enter it, so vet and staticcheck run there too, and vet fails if
# any of its libraries reaches the root module.
peer_libs='github.com/(maypok86/otter|puzpuzpuz/xsync|hashicorp/golang-lru|dgraph-io/ristretto)'
s_peers_isolated() {
  local found
  found=$({ "$GO" list -m all; cat go.sum; } | grep -E "$peer_libs")
  [ -z "$found" ] || { echo "the peers' libraries reached the root module:"; echo "$found"; return 1; }
}
export -f s_peers_isolated
# consumer is a nested module too (the embedding contract's tests, as a
# router outside the repository writes them, requiring placement through a
# replace to ../): vet and staticcheck run there as well, and vet fails if
# its committed go.mod/go.sum are not what go mod tidy makes of them.
s_vet() {
  "$GO" vet ./... && (cd benchmarks/peers && "$GO" vet ./...) && s_peers_isolated &&
    (cd consumer && "$GO" vet ./... && "$GO" mod tidy -diff) &&
    echo "no findings (root, benchmarks/peers and consumer; no peer library in the root module; consumer tidy)"
}
s_staticcheck() {
  "$GO" run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./... &&
    (cd benchmarks/peers && "$GO" run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...) &&
    (cd consumer && "$GO" run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...) && echo "no findings"
}
# The embedding contract (README.md): the consumer module's tests, each
# named after a contract line, against the exported API only; a few
# seconds, so under -race.
s_consumer() { (cd consumer && "$GO" test -race -count=1 -timeout 3m -v ./...); }
# The public API's changes since the last release tag (scripts/apidiff.sh;
# with no tag yet it says so and passes).
s_apidiff() { scripts/apidiff.sh; }
# The models' TestConformance and TestConformanceDetectsDrift run once, in
# the conformance step, without the race detector: they explore whole
# state spaces, where it only slows them (65 s of the race step for the
# core's drift check alone); the explorer's own concurrency is raced by
# TestExploreSameForEveryWorkerCount in the race step on the witness
# configs, and checked here on the others but three large ones (MCTimeouts,
# MCLiveness, MCBugNoHandOff: 32 s; TestConformance compares them with TLC).
# The saved histories' re-checks (TestRecheckSaved: Porcupine on one
# goroutine per partition, nothing for the race detector to find) run in
# the conformance step, without it: under -race the 10,006-operation bug
# history alone took 35 s of the race step beside another job.
s_race() { "$GO" test -race -count=1 -timeout 15m -skip '^(TestConformance(DetectsDrift)?|TestRecheckSaved)$' ./...; }
# make test leaves out the widest config, MCWide (2.3M states, 80 s of the
# two cores: the core model's other configs cover its actions and
# properties), to stay within ten minutes on a loaded 2-core machine;
# make verify compares it (conformance_wide).
s_conformance() { PLACEMENT_SKIP_WIDE=1 "$GO" test -count=1 -timeout 15m -run '^(TestConformance(DetectsDrift)?|TestExploreSameForEveryWorkerCount)$' -skip '^TestExploreSameForEveryWorkerCount$/^(MCTimeouts|MCLiveness|MCBugNoHandOff)\.cfg$' -v ./model/... &&
    "$GO" test -count=1 -timeout 5m -run '^TestRecheckSaved$' -v ./linearizability/...; }
s_conformance_wide() { "$GO" test -count=1 -timeout 15m -run '^TestConformance$/^MCWide\.cfg$' -v ./model/; }
# The peers: their tests (the behavioural check, the runner's tables) and
# every peers benchmark once at the short size (-short: 20,000 sessions).
s_bench_smoke() {
  "$GO" test -count=1 -timeout 8m -run '^$' -bench . -benchtime 1x ./benchmarks/ &&
    (cd benchmarks/peers && "$GO" test -count=1 -short -timeout 3m -run . -bench . -benchtime 1x ./...)
}
s_bug_zoo() { "$GO" run ./linearizability/cmd/mutants; }
s_bug_zoo_bounds() { "$GO" run ./linearizability/cmd/mutants -bounds; }
s_linearizability_campaign() {
  LINEARIZABILITY_SEEDS=128 LINEARIZABILITY_OPS=1500 LINEARIZABILITY_SEED=1000 \
    "$GO" test -race -count=1 -timeout 15m -run 'TestLinearizable$' -v ./linearizability/
}
s_fuzz() { make --no-print-directory fuzz FUZZTIME=50000x; }
s_tlc() { spec/tla/tlc.sh; }

step gofmt 2m
step vet 10m
step staticcheck 15m
step race 20m
step consumer 5m
if [ "$mode" = test ]; then
  # The bug zoo mostly waits (on its checkers' timeouts and on etcd), the
  # conformance step computes: side by side they share the two cores.
  step bug_zoo 15m bg
fi
step conformance 20m
step bench_smoke 10m
if [ "$mode" = verify ]; then
  step apidiff 10m
  step conformance_wide 10m
  step bug_zoo 15m
  step bug_zoo_bounds 45m
  step linearizability_campaign 20m
  step fuzz 30m
  step tlc 120m
fi

detail() { # name log: one line that says what the step found
  case $1 in
    race) echo "$(grep -cE '^ok' "$2") packages passed" ;;
    consumer) echo "$(grep -cE '^--- PASS' "$2") contract tests passed (consumer/, exported API only)" ;;
    apidiff) grep -E '^apidiff: (no |[0-9])' "$2" | tail -1 ;;
    conformance) echo "$(grep -cE '^    --- PASS: TestConformance/' "$2") configs match TLC; saved histories re-checked in $(grep -cE '^--- PASS: TestRecheckSaved' "$2") packages" ;;
    conformance_wide) grep -cE '^    --- PASS: TestConformance/' "$2" | sed 's/$/ configs match TLC/' ;;
    linearizability_campaign) grep -oE '[0-9]+ operations checked in [^ ]+ \([0-9]+ ops/s\)' "$2" | tail -1 ;;
    bug_zoo) grep -E '^caught' "$2" ;;
    bug_zoo_bounds) grep -E '^longest plain run' "$2" ;;
    fuzz) grep -cE '^ok' "$2" | sed 's/$/ fuzz targets ran clean/' ;;
    bench_smoke) echo "every benchmark ran once (and the peers' tests)" ;;
    tlc) grep -E '^tlc: (SKIPPING|MC)' "$2" | head -1 ;;
    *) tail -1 "$2" ;;
  esac
}

fmt_time() { printf '%dm%02ds' $(($1 / 60)) $(($1 % 60)); }

n=${#names[@]}
# run_step I: runs step I, prints its lines, and leaves its report row in
# $out/NAME.row (and $out/NAME.failed when it did not pass).
run_step() {
  local i=$1 name=${names[$1-1]} limit=${limits[$1-1]}
  local log="$out/$name.log" start end pid beat status result took
  echo "check: [$i/$n] $name: started (limit $limit)${bgs[$1-1]:+, beside the steps after it}"
  start=$(date +%s)
  timeout --kill-after=30s "$limit" bash -c "s_$name" >"$log" 2>&1 &
  pid=$!
  # A heartbeat every minute, so a long step is never silent.
  beat=0
  while kill -0 "$pid" 2>/dev/null; do
    sleep 1
    beat=$((beat + 1))
    if [ $((beat % 60)) -eq 0 ]; then
      echo "check: [$i/$n] $name: running for $(fmt_time $beat); last line: $(tail -1 "$log" | cut -c1-100)"
    fi
  done
  wait "$pid"
  status=$?
  end=$(date +%s)
  result=PASS
  if [ $status -eq 124 ] || [ $status -eq 137 ]; then
    result=TIMEOUT
  elif [ $status -ne 0 ]; then
    result=FAIL
  fi
  grep -q '^tlc: SKIPPING' "$log" && result=SKIP
  [ "$result" = PASS ] || [ "$result" = SKIP ] || touch "$out/$name.failed"
  took=$((end - start))
  echo "check: [$i/$n] $name: $result in $(fmt_time $took) (job so far $(fmt_time $((end - job_start)))); log: $log"
  if [ "$result" = FAIL ] || [ "$result" = TIMEOUT ]; then
    echo "---- last lines of $log ----"
    tail -80 "$log"
    echo "----"
  fi
  printf '%-26s %-7s %7s  %s\n' "$name" "$result" "$(fmt_time $took)" "$(detail "$name" "$log")" >"$out/$name.row"
}
bg_pids=()
for ((i = 1; i <= n; i++)); do
  if [ -n "${bgs[i-1]}" ]; then
    run_step "$i" &
    bg_pids+=($!)
  else
    run_step "$i"
  fi
done
for pid in "${bg_pids[@]}"; do wait "$pid"; done
for name in "${names[@]}"; do
  rows+=("$(cat "$out/$name.row" 2>/dev/null || printf '%-26s %-7s' "$name" "NO ROW")")
  if [ -e "$out/$name.failed" ] || [ ! -e "$out/$name.row" ]; then failed=1; fi
done

echo
echo "placement $mode report ($(date -u +%Y-%m-%dT%H:%MZ), $($GO version | cut -d' ' -f3), $(nproc) cores, logs in $out)"
printf '%-26s %-7s %7s  %s\n' CHECK RESULT TIME DETAIL
printf '%s\n' "${rows[@]}"
echo "check: $mode took $(fmt_time $(($(date +%s) - job_start)))"
if [ $failed -ne 0 ]; then echo "check: $mode FAILED"; exit 1; fi
echo "check: $mode: all checks passed"
