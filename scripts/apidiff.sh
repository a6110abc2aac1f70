#!/usr/bin/env bash
# scripts/apidiff.sh: the public API's changes since the last release tag
# (make verify's apidiff step; docs/compatibility.md says what they mean).
#
# It snapshots the last v* tag with git archive (nothing in the checkout or
# its git metadata changes), writes both versions' export data with
# golang.org/x/exp/cmd/apidiff (pinned below, run with go run), and prints
# apidiff's report for every public package (impl/...). Incompatible changes
# there fail the step unless CHANGELOG.md's Unreleased section has a
# "### Breaking" heading listing them (the next tag is then a minor bump
# while the major version is 0, a major one after v1). With no tag yet it
# says so and passes: the first tag is v0.1.0 (docs/releases/v0.1.0.md).
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
APIDIFF=golang.org/x/exp/cmd/apidiff@v0.0.0-20261120182113-8801fbdfac81
MODULE=github.com/placementlab/placement
export GOWORK=off

tag=${APIDIFF_BASE:-$(git describe --tags --abbrev=0 --match 'v[0-9]*' 2>/dev/null || true)}
if [ -z "$tag" ]; then
  echo "apidiff: no release tag yet: nothing to compare against (the first tag will be v0.1.0; its notes are docs/releases/v0.1.0.md)"
  exit 0
fi
tmp=$(mktemp -d -t placement-apidiff.XXXXXX)
trap 'chmod -R u+w "$tmp" 2>/dev/null; rm -rf "$tmp"' EXIT
mkdir "$tmp/old"
git archive "$tag" | tar -x -C "$tmp/old"
quiet() { grep -v '^Ignoring internal package' >&2 || true; } # apidiff skips internal/ itself
(cd "$tmp/old" && "$GO" run "$APIDIFF" -m -w "$tmp/old.export" "$MODULE" 2> >(quiet))
"$GO" run "$APIDIFF" -m -w "$tmp/new.export" "$MODULE" 2> >(quiet)
"$GO" run "$APIDIFF" -m "$tmp/old.export" "$tmp/new.export" >"$tmp/report.txt" 2> >(quiet)
# The report lists "Incompatible changes:" and "Compatible changes:", one
# "- ./<package>.<name>: ..." line each; keep the public packages' (impl/).
section() { awk -v want="$1" '/^(Incompatible|Compatible) changes:$/{s = ($0 == want); next} s && /^- \.\/impl\//' "$tmp/report.txt"; }
section "Incompatible changes:" >"$tmp/incompatible.txt"
section "Compatible changes:" >"$tmp/compatible.txt"
incompatible=$(wc -l <"$tmp/incompatible.txt")
echo "apidiff: public API changes since $tag (impl/...):"
echo "incompatible:"; if [ -s "$tmp/incompatible.txt" ]; then cat "$tmp/incompatible.txt"; else echo "  none"; fi
echo "compatible:"; if [ -s "$tmp/compatible.txt" ]; then cat "$tmp/compatible.txt"; else echo "  none"; fi
if [ "$incompatible" -gt 0 ]; then
  if [ -f CHANGELOG.md ] && awk '/^## /{u = ($0 ~ /Unreleased/)} u && /^### Breaking/{found=1} END{exit !found}' CHANGELOG.md; then
    echo "apidiff: $incompatible incompatible change(s) since $tag, listed under CHANGELOG.md's Unreleased \"### Breaking\""
  else
    echo "apidiff: $incompatible incompatible change(s) since $tag and no \"### Breaking\" under CHANGELOG.md's Unreleased (docs/compatibility.md)"
    exit 1
  fi
else
  echo "apidiff: no incompatible change since $tag"
fi
