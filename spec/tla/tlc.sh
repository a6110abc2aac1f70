#!/usr/bin/env bash
# Runs TLC on every MC*.cfg in spec/tla and records what it reports as data
# in spec/tla/results/<config>.json, which the Go tests compare the model
# explorer against. TLC is not vendored: point TLA2TOOLS_JAR at a
# tla2tools.jar. Without it this script says so and does nothing.
#
#   TLA2TOOLS_JAR=/path/to/tla2tools.jar make tlc          # every config
#   TLA2TOOLS_JAR=... spec/tla/tlc.sh MCBugRoomOffByOne.cfg  # some configs
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
if [ -z "${TLA2TOOLS_JAR:-}" ] || [ ! -f "${TLA2TOOLS_JAR}" ]; then
  echo "tlc: SKIPPING TLC: TLA2TOOLS_JAR does not name a tla2tools.jar (it is '${TLA2TOOLS_JAR:-unset}')."
  echo "tlc: the committed results in spec/tla/results are still compared with the model by 'make test'."
  exit 0
fi
command -v java >/dev/null || { echo "tlc: java is not installed" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$here"
configs=("$@")
[ ${#configs[@]} -gt 0 ] || configs=(MC*.cfg)
(cd "$root" && go build -o "$work/tlcresult" ./model/cmd/tlcresult && go build -o "$work/claimsresult" ./model/claims/cmd/claimsresult)
fail=0
for cfg in "${configs[@]}"; do
  name=${cfg%.cfg}
  dump=()
  case $name in MCBug*|MCWitness*|MCClaimsBug*|MCClaimsWitness*) must_fail=1 ;; *) must_fail=0; dump=(-dump "$work/$name.dump") ;; esac
  # The claims spec (MCClaims*) has its own module and recorder; its bounds end behaviours, so no deadlock check.
  module=MCPlacement.tla; result=tlcresult; extra=()
  case $name in MCClaims*) module=MCClaims.tla; result=claimsresult; extra=(-deadlock) ;; esac
  echo "tlc: checking $cfg ..."
  status=0
  # One worker: TLC's reported depth is exact only with one.
  java -XX:+UseParallelGC -cp "$TLA2TOOLS_JAR" tlc2.TLC -workers 1 -metadir "$work/meta-$name" \
    -noGenerateSpecTE "${extra[@]}" "${dump[@]}" -config "$cfg" "$module" >"$work/$name.out" 2>&1 || status=$?
  if [ $must_fail = 1 ] && [ $status -eq 0 ]; then
    echo "tlc: $cfg must fail but TLC found no violation" >&2; fail=1; continue
  fi
  if [ $must_fail = 0 ] && [ $status -ne 0 ]; then
    echo "tlc: $cfg failed (exit $status):" >&2; tail -40 "$work/$name.out" >&2; fail=1; continue
  fi
  if ! "$work/$result" -config "$cfg" -tlc-output "$work/$name.out" ${dump[@]:+-dump "${dump[1]}"} \
      -o "results/$name.json"; then
    fail=1; continue
  fi
  rm -f "${dump[@]:1}"
  grep -E 'states generated|violated' "$work/$name.out" | sed "s/^/tlc: $name: /"
done
exit $fail
