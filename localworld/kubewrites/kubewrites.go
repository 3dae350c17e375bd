// Package kubewrites counts the writes a Kubernetes client makes — creates, updates, patches
// and deletes, by resource — from a wrapper around the client's HTTP transport. Integration
// tests and the benchmark use it to measure what one runner costs the API server; reads
// (gets, lists, watches) are not counted, because informers make them independent of the
// number of runner lifecycles.
package kubewrites

import (
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
)

// Verb is the kind of write, named as Kubernetes audit logs and RBAC name them.
type Verb string

// The verbs of writes.
const (
	Create           Verb = "create"
	Update           Verb = "update"
	Patch            Verb = "patch"
	Delete           Verb = "delete"
	DeleteCollection Verb = "deletecollection"
)

// Key is what a write is counted under: its verb and resource, with the subresource after a
// slash ("pods/status", "pods/binding").
type Key struct {
	Verb     Verb
	Resource string
}

// String renders a key as "create pods".
func (k Key) String() string { return string(k.Verb) + " " + k.Resource }

// Write is one write request as the client sent it.
type Write struct {
	Key
	Namespace string
	// Name is the object's name: from the path, or for a create from the body (empty for a
	// generateName, or a body of a type the clientset does not know).
	Name string
	// At is when the request left the client.
	At time.Time
	// Status is the API server's answer; 0 when the request failed without one.
	Status int
}

// Counter records every write made through the configs it wrapped. It is safe for concurrent
// use; the zero value is not usable, create one with NewCounter.
type Counter struct {
	mu     sync.Mutex
	writes []Write
	now    func() time.Time
}

// NewCounter returns an empty Counter.
func NewCounter() *Counter { return &Counter{now: time.Now} }

// Wrap returns a copy of cfg whose requests pass through the counter; cfg is not modified.
func (c *Counter) Wrap(cfg *rest.Config) *rest.Config {
	out := rest.CopyConfig(cfg)
	out.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			w, ok := describe(req)
			if !ok {
				return rt.RoundTrip(req)
			}
			w.At = c.now()
			resp, err := rt.RoundTrip(req)
			if resp != nil {
				w.Status = resp.StatusCode
			}
			c.mu.Lock()
			c.writes = append(c.writes, w)
			c.mu.Unlock()
			return resp, err
		})
	})
	return out
}

// Writes returns every write recorded since the last Reset, in the order they were answered.
func (c *Counter) Writes() []Write {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.writes)
}

// Counts returns the number of writes per verb and resource.
func (c *Counter) Counts() map[Key]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[Key]int{}
	for _, w := range c.writes {
		out[w.Key]++
	}
	return out
}

// Total is the number of writes recorded.
func (c *Counter) Total() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.writes)
}

// Reset forgets every recorded write.
func (c *Counter) Reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.writes = nil
}

// String renders the counts sorted by key, e.g. "create pods=20 delete pods=20".
func (c *Counter) String() string {
	counts := c.Counts()
	keys := slices.SortedFunc(maps.Keys(counts), func(a, b Key) int { return strings.Compare(a.String(), b.String()) })
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s=%d", k, counts[k]))
	}
	return strings.Join(parts, " ")
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// describe turns a write request into a Write; reads and anything it cannot parse as a
// Kubernetes resource path are not writes.
func describe(req *http.Request) (Write, bool) {
	var verb Verb
	switch req.Method {
	case http.MethodPost:
		verb = Create
	case http.MethodPut:
		verb = Update
	case http.MethodPatch:
		verb = Patch
	case http.MethodDelete:
		verb = Delete
	default:
		return Write{}, false
	}
	p, ok := ParsePath(req.URL.Path)
	if !ok {
		return Write{}, false
	}
	switch {
	case verb == Delete && p.Name == "":
		verb = DeleteCollection
	case verb == Create && p.Name == "":
		p.Name = createdName(req)
	}
	res := p.Resource
	if p.Subresource != "" {
		res += "/" + p.Subresource
	}
	return Write{Key: Key{Verb: verb, Resource: res}, Namespace: p.Namespace, Name: p.Name}, true
}

// Path is a Kubernetes API path taken apart.
type Path struct {
	Namespace, Resource, Name, Subresource string
}

// ParsePath takes apart /api/v1/namespaces/ns/pods/name/status and
// /apis/group/version/[namespaces/ns/]resource[/name[/subresource]]. A namespace object itself
// (/api/v1/namespaces/name) is the resource "namespaces".
func ParsePath(path string) (Path, bool) {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	switch {
	case len(parts) >= 3 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 4 && parts[0] == "apis":
		parts = parts[3:]
	default:
		return Path{}, false
	}
	var p Path
	if len(parts) >= 3 && parts[0] == "namespaces" {
		p.Namespace, parts = parts[1], parts[2:]
	}
	p.Resource = parts[0]
	if len(parts) > 1 {
		p.Name = parts[1]
	}
	if len(parts) > 2 {
		p.Subresource = parts[2]
	}
	return p, p.Resource != ""
}

// createdName reads the created object's name from the request body without consuming it
// (client-go's bodies can be re-read through GetBody). client-go sends built-in types as
// protobuf, others as JSON; the clientset's own deserializer reads both.
func createdName(req *http.Request) string {
	if req.GetBody == nil {
		return ""
	}
	body, err := req.GetBody()
	if err != nil {
		return ""
	}
	defer body.Close()
	raw, err := io.ReadAll(io.LimitReader(body, 4<<20))
	if err != nil {
		return ""
	}
	obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(raw, nil, nil)
	if err != nil {
		return ""
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return ""
	}
	return m.GetName()
}
