#!/usr/bin/env bash
# Builds the real parts of the local test world once per machine: the Temporal CLI (dev server,
# Web UI, operator commands), kube-apiserver and etcd, and fetches GitHub's published OpenAPI
# description for the contract test. Everything lands in a per-machine cache keyed by version, so
# a warm run (even from a fresh clone) builds nothing; bin/ in the repository links to it.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
cache=${RUNNERFLOW_TOOLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/runnerflow/tools}
export GOTOOLCHAIN=local GOFLAGS=-buildvcs=false

temporal_version=1.5.1
kubernetes_version=v1.34.4
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
  github-openapi) fetch_github_openapi ;;
  webhook-examples) fetch_webhook_examples ;;
  all) build_temporal; build_kubernetes; fetch_github_openapi; fetch_webhook_examples ;;
  *) echo "usage: $0 [all|temporal|kubernetes|github-openapi|webhook-examples]" >&2; exit 2 ;;
esac

[ -x "$cache/temporal-$temporal_version/temporal" ] && link "$cache/temporal-$temporal_version/temporal" temporal
[ -x "$cache/kubernetes-$kubernetes_version/kube-apiserver" ] && link "$cache/kubernetes-$kubernetes_version/kube-apiserver" kube-apiserver
[ -x "$cache/kubernetes-$kubernetes_version/etcd" ] && link "$cache/kubernetes-$kubernetes_version/etcd" etcd
[ -s "$cache/octokit-openapi-$octokit_openapi_version/ghec.json" ] && link "$cache/octokit-openapi-$octokit_openapi_version/ghec.json" github-openapi.json
[ -s "$cache/octokit-webhooks-examples-$octokit_webhooks_examples_version/webhook-examples.json" ] && link "$cache/octokit-webhooks-examples-$octokit_webhooks_examples_version/webhook-examples.json" github-webhook-examples.json
exit 0
