package githubdouble

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"
)

// specPath is where scripts/tools.sh links GitHub's published OpenAPI description
// (@octokit/openapi, generated/ghec.json).
const specPath = "../../bin/github-openapi.json"

// specOperation is one operation of GitHub's REST description.
type specOperation struct{ method, path string }

// servedOperations lists every operation the double serves; the contract test must exercise
// each of them.
func servedOperations() []specOperation {
	var ops []specOperation
	for _, p := range []string{"/repos/{owner}/{repo}", "/orgs/{org}", "/enterprises/{enterprise}"} {
		ops = append(ops,
			specOperation{"post", p + "/actions/runners/registration-token"},
			specOperation{"post", p + "/actions/runners/remove-token"},
			specOperation{"post", p + "/actions/runners/generate-jitconfig"},
			specOperation{"get", p + "/actions/runners"},
			specOperation{"get", p + "/actions/runners/{runner_id}"},
			specOperation{"delete", p + "/actions/runners/{runner_id}"},
		)
	}
	return append(append(ops,
		specOperation{"get", "/repos/{owner}/{repo}/actions/runs"},
		specOperation{"get", "/repos/{owner}/{repo}/actions/runs/{run_id}"},
		specOperation{"get", "/repos/{owner}/{repo}/actions/runs/{run_id}/jobs"},
		specOperation{"get", "/repos/{owner}/{repo}/actions/jobs/{job_id}"},
		specOperation{"get", "/repos/{owner}/{repo}/contents/{path}"},
		specOperation{"post", "/app/installations/{installation_id}/access_tokens"},
	), hookDeliveryOperations()...)
}

// servedWebhooks are the x-webhooks entries whose payloads the double sends.
var servedWebhooks = []string{"workflow-job-queued", "workflow-job-in-progress", "workflow-job-completed", "ping"}

// contract is GitHub's description trimmed to what the double serves, ready to validate with.
type contract struct {
	doc        *openapi3.T
	router     routers.Router
	webhooks   map[string]*openapi3.SchemaRef // payload schema by x-webhooks name
	basicError *openapi3.SchemaRef
}

var (
	contractOnce   sync.Once
	loadedContract *contract
	contractErr    error
)

// loadContract loads the trimmed description once per test binary.
func loadContract(t *testing.T) *contract {
	t.Helper()
	contractOnce.Do(func() { loadedContract, contractErr = buildContract() })
	if contractErr != nil {
		t.Fatalf("loading GitHub's OpenAPI description: %v", contractErr)
	}
	return loadedContract
}

func buildContract() (*contract, error) {
	data, err := os.ReadFile(specPath)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%s is missing: run scripts/tools.sh github-openapi", specPath)
	}
	if err != nil {
		return nil, err
	}
	var full map[string]any
	if err := json.Unmarshal(data, &full); err != nil {
		return nil, fmt.Errorf("parsing %s: %w", specPath, err)
	}
	trimmed, hookSchemas, err := trimSpec(full, servedOperations(), servedWebhooks)
	if err != nil {
		return nil, err
	}
	raw, err := json.Marshal(trimmed)
	if err != nil {
		return nil, err
	}
	doc, err := openapi3.NewLoader().LoadFromData(raw)
	if err != nil {
		return nil, fmt.Errorf("loading the trimmed description: %w", err)
	}
	if err := doc.Validate(context.Background(), openapi3.DisableExamplesValidation()); err != nil {
		return nil, fmt.Errorf("the trimmed description is not valid OpenAPI: %w", err)
	}
	router, err := legacy.NewRouter(doc, openapi3.DisableExamplesValidation())
	if err != nil {
		return nil, err
	}
	c := &contract{doc: doc, router: router, webhooks: map[string]*openapi3.SchemaRef{}}
	for name, schema := range hookSchemas {
		c.webhooks[name] = doc.Components.Schemas[schema]
		if c.webhooks[name] == nil {
			return nil, fmt.Errorf("webhook %s: schema %s not loaded", name, schema)
		}
	}
	c.basicError = doc.Components.Schemas["basic-error"]
	return c, nil
}

// trimSpec keeps the given operations and webhooks and the components they reference
// (transitively), drops examples, and declares GitHub's vendor media types next to
// application/json. It returns the trimmed document and each webhook's payload schema name.
func trimSpec(full map[string]any, ops []specOperation, hooks []string) (map[string]any, map[string]string, error) {
	stripExamples(full)
	paths, _ := full["paths"].(map[string]any)
	outPaths := map[string]any{}
	for _, op := range ops {
		item, _ := paths[op.path].(map[string]any)
		if item[op.method] == nil {
			return nil, nil, fmt.Errorf("GitHub's description has no %s %s", strings.ToUpper(op.method), op.path)
		}
		dst, _ := outPaths[op.path].(map[string]any)
		if dst == nil {
			dst = map[string]any{}
			if params, ok := item["parameters"]; ok {
				dst["parameters"] = params
			}
			outPaths[op.path] = dst
		}
		dst[op.method] = item[op.method]
	}
	outPaths = withMultiSegmentPaths(outPaths)
	xw, _ := full["x-webhooks"].(map[string]any)
	outHooks, hookSchemas := map[string]any{}, map[string]string{}
	for _, name := range hooks {
		ref, _ := dig(xw, name, "post", "requestBody", "content", "application/json", "schema", "$ref").(string)
		if ref == "" {
			return nil, nil, fmt.Errorf("GitHub's description has no x-webhooks %s payload schema", name)
		}
		outHooks[name] = xw[name]
		hookSchemas[name] = strings.TrimPrefix(ref, "#/components/schemas/")
	}
	out := map[string]any{
		"openapi": full["openapi"], "info": full["info"],
		"servers": []any{map[string]any{"url": "https://api.github.com"}},
		"paths":   outPaths, "x-webhooks": outHooks,
	}
	comps, err := referencedComponents(full, out)
	if err != nil {
		return nil, nil, err
	}
	out["components"] = comps
	addVendorMediaTypes(out)
	return out, hookSchemas, nil
}

// withMultiSegmentPaths marks the path parameters GitHub's description flags
// x-multi-segment (a file's path in the contents API, slashes and all) as the router's
// wildcard, "{path*}", so a request for "dir/file" finds its operation; the router reports the
// parameter under its own name.
func withMultiSegmentPaths(paths map[string]any) map[string]any {
	out := make(map[string]any, len(paths))
	for p, item := range paths {
		for _, op := range item.(map[string]any) {
			params, _ := dig(op, "parameters").([]any)
			for _, param := range params {
				if multi, _ := dig(param, "x-multi-segment").(bool); multi && dig(param, "in") == "path" {
					name, _ := dig(param, "name").(string)
					p = strings.Replace(p, "{"+name+"}", "{"+name+"*}", 1)
				}
			}
		}
		out[p] = item
	}
	return out
}

// operationPath is the description's path of a route: the wildcard of a multi-segment
// parameter (withMultiSegmentPaths) back to its plain name.
func operationPath(routePath string) string { return strings.ReplaceAll(routePath, "*}", "}") }

// referencedComponents copies every component reachable from root, plus basic-error (used
// for answers the description does not document).
func referencedComponents(full, root map[string]any) (map[string]any, error) {
	src, _ := full["components"].(map[string]any)
	out := map[string]any{}
	pending := []string{"#/components/schemas/basic-error"}
	seen := map[string]bool{}
	collectRefs(root, func(ref string) { pending = append(pending, ref) })
	for len(pending) > 0 {
		ref := pending[len(pending)-1]
		pending = pending[:len(pending)-1]
		if seen[ref] {
			continue
		}
		seen[ref] = true
		kind, name, ok := strings.Cut(strings.TrimPrefix(ref, "#/components/"), "/")
		section, _ := src[kind].(map[string]any)
		if !ok || section[name] == nil {
			return nil, fmt.Errorf("unresolvable reference %s", ref)
		}
		dst, _ := out[kind].(map[string]any)
		if dst == nil {
			dst = map[string]any{}
			out[kind] = dst
		}
		dst[name] = section[name]
		collectRefs(section[name], func(r string) { pending = append(pending, r) })
	}
	return out, nil
}

func collectRefs(v any, add func(string)) {
	switch v := v.(type) {
	case map[string]any:
		for k, child := range v {
			if s, ok := child.(string); ok && k == "$ref" {
				add(s)
				continue
			}
			collectRefs(child, add)
		}
	case []any:
		for _, child := range v {
			collectRefs(child, add)
		}
	}
}

// stripExamples removes "examples" from media types and parameters (the objects that carry a
// "schema"), leaving schema properties that happen to be called "examples" alone.
func stripExamples(v any) {
	switch v := v.(type) {
	case map[string]any:
		if _, ok := v["schema"]; ok {
			delete(v, "examples")
		}
		for _, child := range v {
			stripExamples(child)
		}
	case []any:
		for _, child := range v {
			stripExamples(child)
		}
	}
}

// addVendorMediaTypes declares GitHub's vendor media types wherever application/json is
// declared: go-github asks for application/vnd.github.v3+json, the description names only
// application/json, and GitHub answers both alike.
func addVendorMediaTypes(v any) {
	switch v := v.(type) {
	case map[string]any:
		if content, ok := v["content"].(map[string]any); ok && content["application/json"] != nil {
			content["application/vnd.github.v3+json"] = content["application/json"]
			content["application/vnd.github+json"] = content["application/json"]
		}
		for _, child := range v {
			addVendorMediaTypes(child)
		}
	case []any:
		for _, child := range v {
			addVendorMediaTypes(child)
		}
	}
}

func dig(v any, keys ...string) any {
	for _, k := range keys {
		m, _ := v.(map[string]any)
		v = m[k]
	}
	return v
}

// exchange is one recorded HTTP request and its answer.
type exchange struct {
	method, url string
	reqHeader   http.Header
	reqBody     []byte
	status      int
	respHeader  http.Header
	respBody    []byte
}

// recorder is an http.RoundTripper that records every exchange for validation.
type recorder struct {
	base      http.RoundTripper
	mu        sync.Mutex
	exchanges []exchange
}

func (rec *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil {
		b, err := io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, err
		}
		body = b
		req = req.Clone(req.Context())
		req.Body = io.NopCloser(bytes.NewReader(body))
	}
	resp, err := rec.base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	respBody, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(respBody))
	rec.mu.Lock()
	defer rec.mu.Unlock()
	rec.exchanges = append(rec.exchanges, exchange{
		method: req.Method, url: req.URL.String(), reqHeader: req.Header.Clone(), reqBody: body,
		status: resp.StatusCode, respHeader: resp.Header.Clone(), respBody: respBody,
	})
	return resp, nil
}

func (rec *recorder) all() []exchange {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return append([]exchange(nil), rec.exchanges...)
}

// requestInput finds the operation of a request (addressed to api.github.com, as the
// description's server says) and prepares its validation input.
func (c *contract) requestInput(method, rawURL string, header http.Header, body []byte) (*openapi3filter.RequestValidationInput, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, err
	}
	u.Scheme, u.Host = "https", "api.github.com"
	req, err := http.NewRequest(method, u.String(), bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header = header.Clone()
	route, params, err := c.router.FindRoute(req)
	if err != nil {
		return nil, fmt.Errorf("no operation for %s %s: %w", method, u.Path, err)
	}
	return &openapi3filter.RequestValidationInput{
		Request: req, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, MultiError: true},
	}, nil
}

// validateRequest checks a request against its operation.
func (c *contract) validateRequest(method, rawURL string, header http.Header, body []byte) error {
	in, err := c.requestInput(method, rawURL, header, body)
	if err != nil {
		return err
	}
	return openapi3filter.ValidateRequest(context.Background(), in)
}

// validate checks an exchange's request and answer and returns its operation ("GET /path").
// Answers the description does not document (GitHub's 401, 403 and some 404s) must still be
// GitHub's error shape.
func (c *contract) validate(ex exchange) (string, error) {
	ex = withoutKnownClientQuirks(ex)
	in, err := c.requestInput(ex.method, ex.url, ex.reqHeader, ex.reqBody)
	if err != nil {
		return "", err
	}
	op := in.Route.Method + " " + operationPath(in.Route.Path)
	if err := openapi3filter.ValidateRequest(context.Background(), in); err != nil {
		return op, fmt.Errorf("request: %w", err)
	}
	if err := c.validateResponse(in, ex.status, ex.respHeader, ex.respBody); err != nil {
		return op, fmt.Errorf("answer %d: %w", ex.status, err)
	}
	return op, nil
}

func (c *contract) validateResponse(in *openapi3filter.RequestValidationInput, status int, header http.Header, body []byte) error {
	out := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in, Status: status, Header: header,
		Options: &openapi3filter.Options{MultiError: true},
	}
	out.SetBodyBytes(body)
	if err := openapi3filter.ValidateResponse(context.Background(), out); err != nil {
		return err
	}
	if in.Route.Operation.Responses.Status(status) != nil || status < 400 {
		return nil
	}
	var v map[string]any
	if err := json.Unmarshal(body, &v); err != nil {
		return fmt.Errorf("undocumented error answer is not JSON: %w", err)
	}
	if msg, _ := v["message"].(string); msg == "" {
		return errors.New("undocumented error answer has no message")
	}
	return c.basicError.Value.VisitJSON(v, openapi3.MultiErrors())
}

// validateWebhook checks a webhook payload against the payload schema of its x-webhooks entry.
func (c *contract) validateWebhook(name string, payload []byte) error {
	schema := c.webhooks[name]
	if schema == nil {
		return fmt.Errorf("no webhook schema %q", name)
	}
	var v any
	if err := json.Unmarshal(payload, &v); err != nil {
		return err
	}
	return schema.Value.VisitJSON(v, openapi3.MultiErrors())
}

// withoutKnownClientQuirks undoes client behaviour GitHub tolerates but the description does
// not allow, so that only the double's answers can fail validation. The one known case:
// ghinstallation encodes its nil *InstallationTokenOptions as the JSON body "null" when it
// asks for an installation token; GitHub treats that as no body.
func withoutKnownClientQuirks(ex exchange) exchange {
	if strings.HasSuffix(ex.url, "/access_tokens") && string(bytes.TrimSpace(ex.reqBody)) == "null" {
		ex.reqBody = nil
		ex.reqHeader = ex.reqHeader.Clone()
		ex.reqHeader.Del("Content-Type")
	}
	return ex
}
