package githubdouble

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// ScopeKind says at which level runners are registered.
type ScopeKind string

const (
	// ScopeRepository registers runners for one repository ("owner/repo").
	ScopeRepository ScopeKind = "repository"
	// ScopeOrganization registers runners for every repository of an organization.
	ScopeOrganization ScopeKind = "organization"
	// ScopeEnterprise registers runners for every organization of an enterprise.
	ScopeEnterprise ScopeKind = "enterprise"
)

// Scope names a place runners are registered: a repository "owner/repo", an organization login
// or an enterprise slug.
type Scope struct {
	Kind ScopeKind
	Name string
}

// RepoScope is the scope of repository runners.
func RepoScope(fullName string) Scope { return Scope{Kind: ScopeRepository, Name: fullName} }

// OrgScope is the scope of organization runners.
func OrgScope(org string) Scope { return Scope{Kind: ScopeOrganization, Name: org} }

// EnterpriseScope is the scope of enterprise runners.
func EnterpriseScope(slug string) Scope { return Scope{Kind: ScopeEnterprise, Name: slug} }

// String renders the scope as its URL prefix, e.g. "orgs/acme".
func (sc Scope) String() string {
	switch sc.Kind {
	case ScopeRepository:
		return "repos/" + sc.Name
	case ScopeOrganization:
		return "orgs/" + sc.Name
	case ScopeEnterprise:
		return "enterprises/" + sc.Name
	}
	return string(sc.Kind) + "/" + sc.Name
}

// key is the case-folded map key of a scope.
func (sc Scope) key() string { return string(sc.Kind) + ":" + lower(sc.Name) }

// RepositorySpec describes a repository to add to the double.
type RepositorySpec struct {
	// FullName is "owner/repo".
	FullName string
	// OwnerType is "Organization" or "User"; empty means "Organization". An organization owner
	// is created on first use.
	OwnerType string
	// Enterprise is the slug of the enterprise the owning organization belongs to (optional,
	// organizations only). It is created on first use.
	Enterprise string
}

type repository struct {
	id        int64
	owner     string
	name      string
	ownerType string
	ownerID   int64
	org       string // case-folded organization login; "" for user-owned repositories
	created   time.Time
	// commits are the repository's commits by SHA and branches their heads (repofiles.go);
	// nil until the first PushFiles.
	commits  map[string]*commit
	branches map[string]string
}

func (r *repository) fullName() string { return r.owner + "/" + r.name }

type organization struct {
	id         int64
	login      string
	enterprise string // case-folded slug; "" when the organization is in no enterprise
}

type enterprise struct {
	id      int64
	slug    string
	created time.Time
}

type runnerGroup struct {
	id   int64
	name string
}

// defaultGroupID is the id GitHub gives every organization's and enterprise's "Default" group.
const defaultGroupID = 1

// state is everything the double knows; Server.mu guards it.
type state struct {
	counters    map[string]int64
	repos       map[string]*repository   // by case-folded full name
	orgs        map[string]*organization // by case-folded login
	enterprises map[string]*enterprise   // by case-folded slug
	users       map[string]int64         // user owners' ids, by case-folded login
	groups      map[string][]runnerGroup // by scope key
	runners     map[int64]*runner
	credentials map[string]int64 // runner credential -> runner id
	jobs        map[int64]*job
	queued      []int64        // ids of queued jobs, oldest first
	runs        map[int64]*run // runs of workflow files (StartRun), by id
	regTokens   map[string]scopedToken
	apiTokens   map[string]apiToken
	budgets     map[string]*budget
	secondaries map[string]*secondaryBudget
	secondary   time.Duration // Retry-After of the manual secondary limit; 0 = off
	calls       map[CallKey]int
	callLog     []Call
	protoCalls  map[CallKey]int
	secrets     []string
	labelIDs    map[string]int64
	wake        chan struct{} // closed when a waiting runner may find work or lose its runner
	// The Actions service (actionsservice.go, scalesets*.go).
	adminTokens  map[string]scopedToken // admin token -> scope it administers
	scaleSets    map[int64]*scaleSet    // by id
	queueTokens  map[string]queueToken  // message-queue token -> session
	serviceCalls map[CallKey]int        // Actions service calls, apart from REST calls
	goneRunners  map[int64]string       // removed scale-set runners' ids -> their scope's key
}

type scopedToken struct {
	scope   Scope
	expires time.Time
}

func newState(cfg Config) *state {
	st := &state{
		counters:     map[string]int64{},
		repos:        map[string]*repository{},
		orgs:         map[string]*organization{},
		enterprises:  map[string]*enterprise{},
		users:        map[string]int64{},
		groups:       map[string][]runnerGroup{},
		runners:      map[int64]*runner{},
		credentials:  map[string]int64{},
		jobs:         map[int64]*job{},
		runs:         map[int64]*run{},
		regTokens:    map[string]scopedToken{},
		apiTokens:    map[string]apiToken{},
		budgets:      map[string]*budget{},
		secondaries:  map[string]*secondaryBudget{},
		calls:        map[CallKey]int{},
		protoCalls:   map[CallKey]int{},
		labelIDs:     map[string]int64{},
		wake:         make(chan struct{}),
		adminTokens:  map[string]scopedToken{},
		scaleSets:    map[int64]*scaleSet{},
		goneRunners:  map[int64]string{},
		queueTokens:  map[string]queueToken{},
		serviceCalls: map[CallKey]int{},
	}
	st.counters["group"] = defaultGroupID
	for _, t := range cfg.Tokens {
		st.apiTokens[t] = apiToken{kind: tokenPersonal}
		st.secrets = append(st.secrets, t)
	}
	if cfg.WebhookSecret != "" {
		st.secrets = append(st.secrets, cfg.WebhookSecret)
	}
	return st
}

func (st *state) next(counter string) int64 {
	st.counters[counter]++
	return st.counters[counter]
}

// wakeWaiters tells every long-polling runner to look again.
func (st *state) wakeWaiters() {
	close(st.wake)
	st.wake = make(chan struct{})
}

// AddRepository adds a repository, and its organization and enterprise when they are new.
// Adding a repository twice is harmless; changing its owner type or enterprise is an error.
func (s *Server) AddRepository(spec RepositorySpec) error {
	owner, name, ok := strings.Cut(spec.FullName, "/")
	if !ok || owner == "" || name == "" || strings.Contains(name, "/") {
		return fmt.Errorf("githubdouble: repository %q is not \"owner/repo\"", spec.FullName)
	}
	ownerType := spec.OwnerType
	if ownerType == "" {
		ownerType = "Organization"
	}
	if ownerType != "Organization" && ownerType != "User" {
		return fmt.Errorf("githubdouble: owner type %q is neither Organization nor User", spec.OwnerType)
	}
	if ownerType == "User" && spec.Enterprise != "" {
		return errors.New("githubdouble: a user-owned repository cannot belong to an enterprise")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.st
	if existing, ok := st.repos[lower(spec.FullName)]; ok {
		if existing.ownerType != ownerType {
			return fmt.Errorf("githubdouble: repository %s already exists with owner type %s", spec.FullName, existing.ownerType)
		}
	}
	if ownerType == "User" {
		return s.addUserRepository(owner, name)
	}
	org, err := s.ensureOrganization(owner, spec.Enterprise)
	if err != nil {
		return err
	}
	if _, ok := st.repos[lower(spec.FullName)]; !ok {
		st.repos[lower(spec.FullName)] = &repository{
			id: st.next("repo"), owner: owner, name: name, ownerType: ownerType,
			ownerID: org.id, org: lower(owner), created: s.now(),
		}
	}
	return nil
}

func (s *Server) addUserRepository(owner, name string) error {
	st := s.st
	if _, ok := st.orgs[lower(owner)]; ok {
		return fmt.Errorf("githubdouble: %s is an organization, not a user", owner)
	}
	uid, ok := st.users[lower(owner)]
	if !ok {
		uid = st.next("user")
		st.users[lower(owner)] = uid
	}
	key := lower(owner + "/" + name)
	if _, ok := st.repos[key]; !ok {
		st.repos[key] = &repository{id: st.next("repo"), owner: owner, name: name, ownerType: "User", ownerID: uid, created: s.now()}
	}
	return nil
}

// ensureOrganization returns the organization, creating it (and its enterprise) on first use.
func (s *Server) ensureOrganization(login, slug string) (*organization, error) {
	st := s.st
	if _, isUser := st.users[lower(login)]; isUser {
		return nil, fmt.Errorf("githubdouble: %s is a user, not an organization", login)
	}
	org, ok := st.orgs[lower(login)]
	if ok {
		if org.enterprise != lower(slug) {
			return nil, fmt.Errorf("githubdouble: organization %s already belongs to enterprise %q", login, org.enterprise)
		}
		return org, nil
	}
	if slug != "" {
		if _, ok := st.enterprises[lower(slug)]; !ok {
			st.enterprises[lower(slug)] = &enterprise{id: st.next("enterprise"), slug: slug, created: s.now()}
			st.groups[EnterpriseScope(slug).key()] = []runnerGroup{{id: defaultGroupID, name: "Default"}}
		}
	}
	org = &organization{id: st.next("org"), login: login, enterprise: lower(slug)}
	st.orgs[lower(login)] = org
	st.groups[OrgScope(login).key()] = []runnerGroup{{id: defaultGroupID, name: "Default"}}
	return org, nil
}

// AddRunnerGroup adds a runner group to an organization or enterprise and returns its id.
// Repositories have no runner groups: their runners are always in "Default" (id 1).
func (s *Server) AddRunnerGroup(scope Scope, name string) (int64, error) {
	if name == "" {
		return 0, errors.New("githubdouble: runner group name is empty")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if scope.Kind == ScopeRepository {
		return 0, errors.New("githubdouble: repositories have no runner groups besides Default")
	}
	if !s.scopeExists(scope) {
		return 0, fmt.Errorf("githubdouble: unknown scope %s", scope)
	}
	groups := s.st.groups[scope.key()]
	if slices.ContainsFunc(groups, func(g runnerGroup) bool { return strings.EqualFold(g.name, name) }) {
		return 0, fmt.Errorf("githubdouble: runner group %q already exists in %s", name, scope)
	}
	id := s.st.next("group")
	s.st.groups[scope.key()] = append(groups, runnerGroup{id: id, name: name})
	return id, nil
}

// scopeExists reports whether GitHub would know the scope (a 404 otherwise).
func (s *Server) scopeExists(scope Scope) bool {
	switch scope.Kind {
	case ScopeRepository:
		_, ok := s.st.repos[lower(scope.Name)]
		return ok
	case ScopeOrganization:
		_, ok := s.st.orgs[lower(scope.Name)]
		return ok
	case ScopeEnterprise:
		_, ok := s.st.enterprises[lower(scope.Name)]
		return ok
	}
	return false
}

// group finds a runner group of a scope by id; repositories only have Default.
func (s *Server) group(scope Scope, id int64) (runnerGroup, bool) {
	if scope.Kind == ScopeRepository {
		return runnerGroup{id: defaultGroupID, name: "Default"}, id == defaultGroupID
	}
	for _, g := range s.st.groups[scope.key()] {
		if g.id == id {
			return g, true
		}
	}
	return runnerGroup{}, false
}

// groupByName finds a runner group by name ("" is Default), as config.sh --runnergroup does.
func (s *Server) groupByName(scope Scope, name string) (runnerGroup, bool) {
	if name == "" {
		name = "Default"
	}
	if scope.Kind == ScopeRepository {
		return runnerGroup{id: defaultGroupID, name: "Default"}, strings.EqualFold(name, "Default")
	}
	for _, g := range s.st.groups[scope.key()] {
		if strings.EqualFold(g.name, name) {
			return g, true
		}
	}
	return runnerGroup{}, false
}

// recordSecret remembers a credential the double issued, for IssuedSecrets.
func (s *Server) recordSecret(secret string) { s.st.secrets = append(s.st.secrets, secret) }

// IssuedSecrets returns every credential the double knows or handed out: configured tokens,
// the webhook secret, installation tokens, registration and remove tokens, JIT configurations
// and runner credentials. Tests scan logs and workflow histories for them.
func (s *Server) IssuedSecrets() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.st.secrets)
}
