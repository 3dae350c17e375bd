package activities

import (
	"net/http"
	"strings"
)

// This file turns requests into bounded label values: a GitHub route template instead of a
// URL (which names repositories and runner ids), a Kubernetes verb and resource instead of a
// path (which names namespaces and objects).

// githubRoutes are the GitHub REST endpoints runnerflow calls, as GitHub's REST reference
// writes their paths. Any other request is counted as EndpointOther.
var githubRoutes = func() *http.ServeMux {
	mux := http.NewServeMux()
	add := func(pattern string) { mux.Handle(pattern, http.NotFoundHandler()) }
	for _, scope := range []string{"/repos/{owner}/{repo}", "/orgs/{org}", "/enterprises/{enterprise}"} {
		add("POST " + scope + "/actions/runners/registration-token")
		add("POST " + scope + "/actions/runners/remove-token")
		add("POST " + scope + "/actions/runners/generate-jitconfig")
		add("GET " + scope + "/actions/runners")
		add("GET " + scope + "/actions/runners/{runner_id}")
		add("DELETE " + scope + "/actions/runners/{runner_id}")
	}
	add("GET /repos/{owner}/{repo}/actions/runs")
	add("GET /repos/{owner}/{repo}/actions/runs/{run_id}/jobs")
	add("GET /orgs/{org}/actions/runner-groups")
	add("GET /enterprises/{enterprise}/actions/runner-groups")
	add("POST /app/installations/{installation_id}/access_tokens")
	for _, hook := range []string{"/app/hook", "/orgs/{org}/hooks/{hook_id}", "/repos/{owner}/{repo}/hooks/{hook_id}"} {
		add("GET " + hook + "/deliveries")
		add("POST " + hook + "/deliveries/{delivery_id}/attempts")
	}
	return mux
}()

// EndpointOther is the endpoint label of a request to a route runnerflow does not know.
const EndpointOther = "other"

// ghesAPIPrefix is where GitHub Enterprise Server serves the REST API.
const ghesAPIPrefix = "/api/v3"

// GitHubEndpoint is the route template of a GitHub API request, e.g.
// "POST /orgs/{org}/actions/runners/generate-jitconfig", or EndpointOther.
func GitHubEndpoint(r *http.Request) string {
	probe := &http.Request{Method: r.Method, URL: r.URL, Host: r.URL.Host}
	if path, ok := strings.CutPrefix(r.URL.Path, ghesAPIPrefix); ok && path != "" {
		u := *r.URL
		u.Path, u.RawPath = path, ""
		probe.URL = &u
	}
	if _, pattern := githubRoutes.Handler(probe); pattern != "" {
		return pattern
	}
	return EndpointOther
}

func isAppEndpoint(endpoint string) bool {
	_, path, _ := strings.Cut(endpoint, " ")
	return strings.HasPrefix(path, "/app/")
}

// kubernetesRequest reads the verb and resource of a Kubernetes API request path:
// /api/v1/namespaces/{ns}/pods/{name}/status → ("get", "pods/status") for a GET.
func kubernetesRequest(r *http.Request) (verb, resource string) {
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		parts = parts[2:] // api, version
	case len(parts) >= 3 && parts[0] == "apis":
		parts = parts[3:] // apis, group, version
	default:
		return methodVerb(r, false), "other"
	}
	if len(parts) >= 3 && parts[0] == "namespaces" {
		parts = parts[2:]
	}
	if len(parts) == 0 {
		return methodVerb(r, false), "other"
	}
	resource = parts[0]
	if len(parts) >= 3 {
		resource += "/" + parts[2]
	}
	return methodVerb(r, len(parts) >= 2), resource
}

// methodVerb maps a request to the Kubernetes verb it exercises; named says whether the path
// names one object.
func methodVerb(r *http.Request, named bool) string {
	switch r.Method {
	case http.MethodGet:
		switch {
		case r.URL.Query().Get("watch") == "true" || r.URL.Query().Get("watch") == "1":
			return "watch"
		case named:
			return "get"
		}
		return "list"
	case http.MethodPost:
		return "create"
	case http.MethodPut:
		return "update"
	case http.MethodPatch:
		return "patch"
	case http.MethodDelete:
		if named {
			return "delete"
		}
		return "deletecollection"
	}
	return "other"
}
