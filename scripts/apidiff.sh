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
(cd "$tmp/old" && "$GO" run "$APIDIFF" -m -w "$tmp/old.export" "$MODULE")
"$GO" run "$APIDIFF" -m -w "$tmp/new.export" "$MODULE"
"$GO" run "$APIDIFF" -m "$tmp/old.export" "$tmp/new.export" >"$tmp/report.txt"
# Keep the public packages' sections (## <import path>) only.
awk -v pub="## $MODULE/impl/" '/^## /{keep = index($0, pub) == 1} keep' "$tmp/report.txt" >"$tmp/public.txt"
echo "apidiff: public API changes since $tag:"
if [ -s "$tmp/public.txt" ]; then cat "$tmp/public.txt"; else echo "  none"; fi
incompatible=$("$GO" run "$APIDIFF" -m -incompatible "$tmp/old.export" "$tmp/new.export" |
  awk -v pub="## $MODULE/impl/" '/^## /{keep = index($0, pub) == 1; next} keep && /^- /' | wc -l)
if [ "$incompatible" -gt 0 ]; then
  if awk '/^## /{u = ($0 ~ /Unreleased/)} u && /^### Breaking/{found=1} END{exit !found}' CHANGELOG.md; then
    echo "apidiff: $incompatible incompatible change(s) since $tag, listed under CHANGELOG.md's Unreleased \"### Breaking\""
  else
    echo "apidiff: $incompatible incompatible change(s) since $tag and no \"### Breaking\" under CHANGELOG.md's Unreleased (docs/compatibility.md)"
    exit 1
  fi
else
  echo "apidiff: no incompatible change since $tag"
fi
