#!/bin/sh
# Registers runnerflow's namespace and its custom search attributes (workflows.SearchAttributeTypes),
# so the Temporal UI can list runners by pool and state. Idempotent: it creates only what is missing.
set -eu
ns=${TEMPORAL_NAMESPACE:-default}
until temporal operator cluster health; do sleep 2; done
temporal operator namespace describe --namespace "$ns" >/dev/null 2>&1 ||
  temporal operator namespace create --namespace "$ns" --retention 72h
attribute() {
  if ! temporal operator search-attribute list --namespace "$ns" | grep -qw "$1"; then
    temporal operator search-attribute create --namespace "$ns" --name "$1" --type "$2"
  fi
}
attribute RunnerPool Keyword
attribute RunnerState Keyword
attribute RunnerPoolScope Keyword
attribute RunnerPoolLabels KeywordList
attribute RunnerPoolGroup Keyword
