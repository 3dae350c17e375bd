#!/usr/bin/env bash
# Builds the real parts of the local test world once per machine: the Temporal CLI (dev server,
# Web UI, operator commands), kube-apiserver and etcd, kube-controller-manager (the world's
# garbage collector), actions-runner-controller (the benchmark's peer: v0.27.6's summerwind mode
# from the module proxy, gha-runner-scale-set 0.14.2's scale-set mode from its source), and fetches
# GitHub's published OpenAPI description for the contract test. Everything lands in a per-machine cache keyed by version, so
# a warm run (even from a fresh clone) builds nothing; bin/ in the repository links to it.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
cache=${RUNNERFLOW_TOOLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/runnerflow/tools}
export GOTOOLCHAIN=local GOFLAGS=-buildvcs=false

temporal_version=1.5.1
kubernetes_version=v1.34.4
# actions-runner-controller, the benchmark's peer: the version tools/arc/go.mod requires.
arc_version=v0.27.6
# The linters make test runs: the versions tools/lint/go.mod requires.
workflowcheck_version=v0.6.0
staticcheck_version=v0.8.2
octokit_openapi_version=23.0.2
octokit_webhooks_examples_version=7.6.1

log() { printf 'tools: %s\n' "$*" >&2; }

build_temporal() {
  local out=$cache/temporal-$temporal_version
  [ -x "$out/temporal" ] && return
  log "building the Temporal CLI $temporal_version (minutes on a cold machine)"
  mkdir -p "$out"
  go -C "$repo/tools/temporal" build -ldflags "-s -w -X github.com/temporalio/cli/temporalcli.Version=$temporal_version" \
    -o "$out/temporal.tmp" github.com/temporalio/cli/cmd/temporal
  mv "$out/temporal.tmp" "$out/temporal"
}

build_kubernetes() {
  local out=$cache/kubernetes-$kubernetes_version
  [ -x "$out/kube-apiserver" ] && [ -x "$out/etcd" ] && return
  log "building kube-apiserver and etcd $kubernetes_version (minutes on a cold machine)"
  mkdir -p "$out"
  local minor=${kubernetes_version#v1.}; minor=${minor%%.*}
  local v=k8s.io/component-base/version
  go -C "$repo/tools/k8s" build \
    -ldflags "-X $v.gitVersion=$kubernetes_version -X $v.gitMajor=1 -X $v.gitMinor=$minor" \
    -o "$out/kube-apiserver.tmp" k8s.io/kubernetes/cmd/kube-apiserver
  go -C "$repo/tools/k8s" build -o "$out/etcd.tmp" go.etcd.io/etcd/server/v3
  mv "$out/etcd.tmp" "$out/etcd"
  mv "$out/kube-apiserver.tmp" "$out/kube-apiserver"
}

build_kube_controller_manager() {
  local out=$cache/kubernetes-$kubernetes_version
  [ -x "$out/kube-controller-manager" ] && return
  log "building kube-controller-manager $kubernetes_version (minutes on a cold machine)"
  mkdir -p "$out"
  local minor=${kubernetes_version#v1.}; minor=${minor%%.*}
  local v=k8s.io/component-base/version
  go -C "$repo/tools/k8s" build \
    -ldflags "-X $v.gitVersion=$kubernetes_version -X $v.gitMajor=1 -X $v.gitMinor=$minor" \
    -o "$out/kube-controller-manager.tmp" k8s.io/kubernetes/cmd/kube-controller-manager
  mv "$out/kube-controller-manager.tmp" "$out/kube-controller-manager"
}

# ARC's controller manager and GitHub webhook server, built from its module as released, and its
# actions.summerwind.dev CRDs taken from the same module (one multi-document file).
build_arc() {
  local out=$cache/arc-$arc_version
  [ -x "$out/arc-controller-manager" ] && [ -x "$out/arc-github-webhook-server" ] && [ -s "$out/arc-crds.yaml" ] && return
  log "building actions-runner-controller $arc_version (minutes on a cold machine)"
  mkdir -p "$out"
  local module=github.com/actions/actions-runner-controller
  go -C "$repo/tools/arc" build -ldflags "-X $module/build.Version=$arc_version" \
    -o "$out/arc-controller-manager.tmp" "$module"
  go -C "$repo/tools/arc" build -ldflags "-X $module/build.Version=$arc_version" \
    -o "$out/arc-github-webhook-server.tmp" "$module/cmd/githubwebhookserver"
  local src
  src=$(go -C "$repo/tools/arc" list -m -f '{{.Dir}}' "$module")
  local crd
  : >"$out/arc-crds.yaml.tmp"
  for crd in "$src"/config/crd/bases/actions.summerwind.dev_*.yaml; do
    { echo "---"; cat "$crd"; } >>"$out/arc-crds.yaml.tmp"
  done
  mv "$out/arc-controller-manager.tmp" "$out/arc-controller-manager"
  mv "$out/arc-github-webhook-server.tmp" "$out/arc-github-webhook-server"
  mv "$out/arc-crds.yaml.tmp" "$out/arc-crds.yaml"
}

# Temporal's workflowcheck (determinism of workflow code) and staticcheck, built from
# tools/lint, whose go.mod pins them.
build_lint() {
  local out=$cache/lint-workflowcheck-$workflowcheck_version-staticcheck-$staticcheck_version
  [ -x "$out/workflowcheck" ] && [ -x "$out/staticcheck" ] && return
  log "building workflowcheck $workflowcheck_version and staticcheck $staticcheck_version"
  mkdir -p "$out"
  go -C "$repo/tools/lint" build -o "$out/workflowcheck.tmp" go.temporal.io/sdk/contrib/tools/workflowcheck
  go -C "$repo/tools/lint" build -o "$out/staticcheck.tmp" honnef.co/go/tools/cmd/staticcheck
  mv "$out/workflowcheck.tmp" "$out/workflowcheck"
  mv "$out/staticcheck.tmp" "$out/staticcheck"
}

# ARC's scale-set mode as its users run it: gha-runner-scale-set $arc_gha_version, whose module
# the Go module proxy does not serve. Its manager (the tree's root package, run with
# --auto-scaling-runner-set-only), its listener (cmd/ghalistener) and its actions.github.com
# CRDs (one multi-document file) come from a source tree named by RUNNERFLOW_ARC_SCALESET_SRC,
# an archive of the tag or a checkout of it; by default the unmodified archive beside the
# repository. Without either the tool is absent and what needs it skips.
arc_gha_version=0.14.2
arc_gha_commit=9bb16ae49d0ce585d8e682aa7e2668a6e832d5d8
arc_gha_src=${RUNNERFLOW_ARC_SCALESET_SRC:-$repo/../shared/peers/actions-runner-controller-gha-runner-scale-set-$arc_gha_version.tar.gz}

build_arc_gha() {
  local out=$cache/arc-gha-$arc_gha_version
  [ -x "$out/arc-gha-controller-manager" ] && [ -x "$out/arc-gha-listener" ] && [ -s "$out/arc-gha-crds.yaml" ] && return
  if [ ! -e "$arc_gha_src" ]; then
    log "actions-runner-controller gha-runner-scale-set $arc_gha_version not built: no source at $arc_gha_src."
    log "  get it with: git clone --branch gha-runner-scale-set-$arc_gha_version https://github.com/actions/actions-runner-controller"
    log "  and name the checkout (or an archive of it) in RUNNERFLOW_ARC_SCALESET_SRC; the peer arc-scaleset is absent until then"
    return 0
  fi
  log "building actions-runner-controller gha-runner-scale-set $arc_gha_version from $arc_gha_src (minutes on a cold machine)"
  mkdir -p "$out"
  local src=$arc_gha_src unpacked=""
  if [ -f "$arc_gha_src" ]; then
    unpacked=$(mktemp -d "$out/src.XXXXXX")
    tar -xzf "$arc_gha_src" -C "$unpacked" --strip-components=1
    src=$unpacked
  fi
  local b=github.com/actions/actions-runner-controller/build
  local ldflags="-s -w -X $b.Version=$arc_gha_version -X $b.CommitSHA=$arc_gha_commit"
  go -C "$src" build -trimpath -ldflags "$ldflags" -o "$out/arc-gha-controller-manager.tmp" .
  go -C "$src" build -trimpath -ldflags "$ldflags" -o "$out/arc-gha-listener.tmp" ./cmd/ghalistener
  local crd
  : >"$out/arc-gha-crds.yaml.tmp"
  for crd in "$src"/config/crd/bases/actions.github.com_*.yaml; do
    { echo "---"; cat "$crd"; } >>"$out/arc-gha-crds.yaml.tmp"
  done
  [ -n "$unpacked" ] && rm -rf "$unpacked"
  mv "$out/arc-gha-controller-manager.tmp" "$out/arc-gha-controller-manager"
  mv "$out/arc-gha-listener.tmp" "$out/arc-gha-listener"
  mv "$out/arc-gha-crds.yaml.tmp" "$out/arc-gha-crds.yaml"
}

fetch_github_openapi() {
  local out=$cache/octokit-openapi-$octokit_openapi_version
  [ -s "$out/ghec.json" ] && return
  log "fetching GitHub's OpenAPI description (@octokit/openapi $octokit_openapi_version)"
  mkdir -p "$out/tmp"
  (cd "$out/tmp" && npm pack --silent "@octokit/openapi@$octokit_openapi_version" >/dev/null 2>&1)
  tar -xzf "$out"/tmp/*.tgz -C "$out/tmp" package/generated/ghec.json
  mv "$out/tmp/package/generated/ghec.json" "$out/ghec.json"
  rm -rf "$out/tmp"
}

fetch_webhook_examples() {
  local out=$cache/octokit-webhooks-examples-$octokit_webhooks_examples_version
  [ -s "$out/webhook-examples.json" ] && return
  log "fetching GitHub's webhook example payloads (@octokit/webhooks-examples $octokit_webhooks_examples_version)"
  mkdir -p "$out/tmp"
  (cd "$out/tmp" && npm pack --silent "@octokit/webhooks-examples@$octokit_webhooks_examples_version" >/dev/null 2>&1)
  tar -xzf "$out"/tmp/*.tgz -C "$out/tmp" package/api.github.com/index.json
  mv "$out/tmp/package/api.github.com/index.json" "$out/webhook-examples.json"
  rm -rf "$out/tmp"
}

link() { mkdir -p "$repo/bin"; ln -sfn "$1" "$repo/bin/$2"; }

case "${1:-all}" in
  temporal) build_temporal ;;
  kubernetes) build_kubernetes ;;
  kube-controller-manager) build_kube_controller_manager ;;
  arc) build_arc; build_arc_gha ;;
  lint) build_lint ;;
  github-openapi) fetch_github_openapi ;;
  webhook-examples) fetch_webhook_examples ;;
  all) build_temporal; build_kubernetes; build_kube_controller_manager; build_arc; build_arc_gha; build_lint; fetch_github_openapi; fetch_webhook_examples ;;
  *) echo "usage: $0 [all|temporal|kubernetes|kube-controller-manager|arc|lint|github-openapi|webhook-examples]" >&2; exit 2 ;;
esac

[ -x "$cache/temporal-$temporal_version/temporal" ] && link "$cache/temporal-$temporal_version/temporal" temporal
[ -x "$cache/kubernetes-$kubernetes_version/kube-apiserver" ] && link "$cache/kubernetes-$kubernetes_version/kube-apiserver" kube-apiserver
[ -x "$cache/kubernetes-$kubernetes_version/etcd" ] && link "$cache/kubernetes-$kubernetes_version/etcd" etcd
[ -x "$cache/kubernetes-$kubernetes_version/kube-controller-manager" ] && link "$cache/kubernetes-$kubernetes_version/kube-controller-manager" kube-controller-manager
for f in arc-controller-manager arc-github-webhook-server arc-crds.yaml; do
  [ -s "$cache/arc-$arc_version/$f" ] && link "$cache/arc-$arc_version/$f" "$f"
done
for f in arc-gha-controller-manager arc-gha-listener arc-gha-crds.yaml; do
  [ -s "$cache/arc-gha-$arc_gha_version/$f" ] && link "$cache/arc-gha-$arc_gha_version/$f" "$f"
done
for f in workflowcheck staticcheck; do
  lint=$cache/lint-workflowcheck-$workflowcheck_version-staticcheck-$staticcheck_version/$f
  [ -x "$lint" ] && link "$lint" "$f"
done
[ -s "$cache/octokit-openapi-$octokit_openapi_version/ghec.json" ] && link "$cache/octokit-openapi-$octokit_openapi_version/ghec.json" github-openapi.json
[ -s "$cache/octokit-webhooks-examples-$octokit_webhooks_examples_version/webhook-examples.json" ] && link "$cache/octokit-webhooks-examples-$octokit_webhooks_examples_version/webhook-examples.json" github-webhook-examples.json
exit 0
