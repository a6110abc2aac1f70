#!/usr/bin/env bash
# The main job: runs every check this repository has and ends with a report.
# Each check's full output is kept in the report directory it names.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${VERIFY_DIR:-$(mktemp -d -t placement-verify.XXXXXX)}
mkdir -p "$out"
rows=()
failed=0
check() { # name detail-command -- command...
  local name=$1; shift
  local log="$out/$name.log" start end status
  start=$(date +%s)
  "$@" >"$log" 2>&1; status=$?
  end=$(date +%s)
  local result=PASS
  [ $status -eq 0 ] || { result=FAIL; failed=1; }
  grep -q '^tlc: SKIPPING' "$log" && result=SKIP
  rows+=("$(printf '%-42s %-5s %5ss  %s' "$name" "$result" "$((end - start))" "$(detail "$name" "$log")")")
  echo "verify: $name: $result"
}
detail() {
  case $1 in
    explore:*) grep -E 'distinct states found|as expected|violated' "$2" | tail -1 | sed 's/^[^:]*: //' ;;
    tlc) grep -E '^tlc: (SKIPPING|MC)' "$2" | head -1 ;;
    race|conformance) grep -cE '^--- PASS' "$2" | sed 's/$/ tests passed (verbose list in the log)/' ;;
    linearizability-campaign) grep -oE '[0-9]+ operations checked in [^ ]+ \([0-9]+ ops/s\)' "$2" | tail -1 ;;
    bug-zoo) grep -E '^caught' "$2" ;;
    fuzz) grep -cE '^ok' "$2" | sed 's/$/ fuzz targets ran clean/' ;;
    bench-smoke) echo "every benchmark ran once" ;;
    *) tail -1 "$2" ;;
  esac
}
check gofmt bash -c 'out=$(gofmt -l $(git ls-files "*.go")); [ -z "$out" ] || { echo "$out"; exit 1; }; echo "all files formatted"'
check vet bash -c 'go vet ./... && echo "no findings"'
check staticcheck bash -c 'go run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./... && echo "no findings"'
check race go test -race -count=1 -v ./...
check conformance go test -count=1 -run 'TestConformance$' -v ./model/
go build -o .bin/explore ./model/cmd/explore || exit 1
for cfg in spec/tla/MC*.cfg; do
  case $cfg in *MCBug*|*MCWitness*) flag=-expect-violation ;; *) flag= ;; esac
  check "explore:$(basename "$cfg")" .bin/explore $flag -config "$cfg"
done
check linearizability-campaign env LINEARIZABILITY_SEEDS=32 LINEARIZABILITY_OPS=1000 LINEARIZABILITY_SEED=1000 \
  go test -count=1 -run 'TestLinearizable$' -v ./linearizability/
check bug-zoo go run ./linearizability/cmd/mutants
check fuzz make fuzz FUZZTIME=50000x
check bench-smoke make bench-smoke
check tlc spec/tla/tlc.sh
echo
echo "placement verify report ($(date -u +%Y-%m-%dT%H:%MZ), $(go version | cut -d' ' -f3), logs in $out)"
printf '%-42s %-5s %6s  %s\n' CHECK RESULT TIME DETAIL
printf '%s\n' "${rows[@]}"
if [ $failed -ne 0 ]; then echo "verify: FAILED"; exit 1; fi
echo "verify: all checks passed"
