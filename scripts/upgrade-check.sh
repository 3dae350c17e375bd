#!/usr/bin/env bash
# Rehearses a deploy from an earlier release (make upgrade-check FROM=<release>): builds that
# release's worker and starter from the repository's own history (the commit CHANGELOG.md names
# for it, exported with git archive), then runs integration/upgrade against the local test world:
# the earlier release runs a burst and a pool at rest, is stopped mid-burst, and this tree's
# worker and starter take over. Fails unless every job runs once and no history meets a
# non-determinism error.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
from=${1:?usage: scripts/upgrade-check.sh <release, e.g. v4>}
export GOTOOLCHAIN=local GOFLAGS=-buildvcs=false

commit=$(awk -v rel="## $from" '$0 == rel {found=1; next} found && /^Commit: / {print $2; exit} /^## / {found=0}' "$repo/CHANGELOG.md")
commit=${commit%.}
if [ -z "$commit" ] || ! git -C "$repo" cat-file -e "$commit^{commit}" 2>/dev/null; then
  echo "upgrade-check: CHANGELOG.md names no commit for release $from" >&2
  exit 2
fi
to="$(cat "$repo/VERSION") ($(git -C "$repo" rev-parse --short HEAD)$(git -C "$repo" diff --quiet HEAD 2>/dev/null || echo ', with uncommitted changes'))"
start=$SECONDS
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "upgrade-check: building $from ($commit) from the repository's history"
mkdir -p "$work/src" "$work/bin"
git -C "$repo" archive "$commit" | tar -x -C "$work/src"
go -C "$work/src" build -o "$work/bin/worker" ./worker
go -C "$work/src" build -o "$work/bin/starter" ./starter
echo "upgrade-check: $from's worker and starter built; rehearsing the upgrade to $to"
cd "$repo"
set +e
RUNNERFLOW_UPGRADE_FROM="$work/bin" go test -tags upgradecheck -count=1 -timeout 30m -v -run TestUpgradeFromEarlierRelease ./integration/upgrade/ 2>&1 |
  grep --line-buffered -v '^[IEW][0-9]\{4\} ' # client-go's leader-election lines
status=${PIPESTATUS[0]}
set -e
outcome=passed
[ "$status" = 0 ] || outcome="FAILED (exit $status)"
# The line a release's CHANGELOG section records.
echo "upgrade-check: $from ($commit) to $to $outcome on $(date -u +%Y-%m-%d) in $(( (SECONDS - start) / 60 )) min $(( (SECONDS - start) % 60 )) s"
exit "$status"
