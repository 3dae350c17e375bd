// Package runners holds runnerflow's end-to-end tests of the runner lifecycle: real
// Temporal server, real kube-apiserver, the GitHub double through go-github, the runner
// simulator, and the worker exactly as worker/main.go assembles it (in-process through
// internal/workerapp, or as a separate process that the tests kill and restart).
package runners
