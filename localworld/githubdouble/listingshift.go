package githubdouble

import (
	"fmt"
)

// GitHub lists runners by offset, 100 a page at most. When it removes runners between two
// page reads (ephemeral runners leave after their job, at any moment), the runners after them
// move up a page and a reader that asked for the next page never sees the one that moved
// across the boundary. RemoveAfterListPage arranges that on demand.

// listRemoval is a one-shot removal armed by RemoveAfterListPage.
type listRemoval struct {
	scope Scope
	page  int
	names []string
	done  chan struct{}
}

// RegisterRunners registers offline ephemeral runners in a scope, as another fleet's JIT
// registrations that have not connected yet: the runners a large scope lists besides a pool's.
func (s *Server) RegisterRunners(scope Scope, labels []string, names ...string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	canon, ok := s.canonicalScope(scope)
	if !ok {
		return fmt.Errorf("githubdouble: no scope %s", scope)
	}
	group, _ := s.group(canon, defaultGroupID)
	for _, name := range names {
		if s.runnerByName(canon, name) != nil {
			return fmt.Errorf("githubdouble: a runner named %s already exists in %s", name, canon)
		}
		s.newRunner(&runner{name: name, scope: canon, labels: append([]string(nil), labels...), group: group, ephemeral: true, jit: true})
	}
	return nil
}

// RemoveAfterListPage arms a one-shot: right after the next runner listing of scope has
// served page (1-based), the named runners are removed, as GitHub removes ephemeral runners
// that finished their jobs while a client reads a listing's pages. The channel closes once
// the removal happened. A runner that is busy by then is left (GitHub removes it after its job).
func (s *Server) RemoveAfterListPage(scope Scope, page int, names ...string) <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := &listRemoval{scope: scope, page: page, names: names, done: make(chan struct{})}
	s.listRemoval = r
	return r.done
}

// afterListPage runs the armed removal if this listing page is its trigger. Callers hold s.mu.
func (s *Server) afterListPage(scope Scope, page int) {
	r := s.listRemoval
	if r == nil || r.page != page || r.scope.key() != scope.key() {
		return
	}
	s.listRemoval = nil
	for _, name := range r.names {
		if rn := s.runnerByName(scope, name); rn != nil && rn.jobID == 0 {
			s.removeRunner(rn)
		}
	}
	close(r.done)
}
