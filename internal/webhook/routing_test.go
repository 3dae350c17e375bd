package webhook

import (
	"testing"

	"github.com/runnerflow/runnerflow/workflows"
)

func repoPool(name, repo string, labels ...string) Pool {
	return Pool{Name: name, Scope: workflows.Scope{Repository: repo}, Labels: labels}
}

func orgPool(name, org, group string, labels ...string) Pool {
	return Pool{Name: name, Scope: workflows.Scope{Organization: org}, Labels: labels, Group: group}
}

func entPool(name, ent, group string, labels ...string) Pool {
	return Pool{Name: name, Scope: workflows.Scope{Enterprise: ent}, Labels: labels, Group: group}
}

func TestRoute(t *testing.T) {
	orgJob := JobTarget{Repository: "acme/app", Owner: "acme", Enterprise: "big", Labels: []string{"self-hosted", "linux"}}
	userJob := JobTarget{Repository: "alice/dotfiles", Owner: "alice", OwnerIsUser: true, Labels: []string{"self-hosted", "linux"}}
	tests := []struct {
		name  string
		pools []Pool
		job   JobTarget
		want  string // "" means no pool
	}{
		{"repository pool wins over organization and enterprise",
			[]Pool{entPool("a-ent", "big", "", "linux"), orgPool("b-org", "acme", "", "linux"), repoPool("z-repo", "acme/app", "linux")}, orgJob, "z-repo"},
		{"organization pool wins over enterprise",
			[]Pool{entPool("a-ent", "big", "", "linux"), orgPool("z-org", "acme", "", "linux")}, orgJob, "z-org"},
		{"enterprise pool when nothing narrower fits",
			[]Pool{entPool("ent", "big", "", "linux"), orgPool("other-org", "globex", "", "linux"), repoPool("other-repo", "acme/web", "linux")}, orgJob, "ent"},
		{"enterprise slug compared case-insensitively",
			[]Pool{entPool("ent", "BIG", "", "linux")}, orgJob, "ent"},
		{"a job without an enterprise slug matches no enterprise pool",
			[]Pool{entPool("ent", "big", "", "linux")}, JobTarget{Repository: "acme/app", Owner: "acme", Labels: []string{"linux"}}, ""},
		{"scope names compared case-insensitively",
			[]Pool{repoPool("repo", "ACME/App", "linux")}, orgJob, "repo"},
		{"every label but self-hosted must be among the pool's, case-insensitively; the pool may have more",
			[]Pool{orgPool("org", "acme", "", "x64", "linux", "gpu")}, JobTarget{Repository: "acme/app", Owner: "acme", Labels: []string{"Self-Hosted", "LINUX", "x64"}}, "org"},
		{"a missing label rules the pool out even at higher precedence",
			[]Pool{repoPool("repo", "acme/app", "windows"), orgPool("org", "acme", "", "linux")}, orgJob, "org"},
		{"a job asking only for self-hosted fits any pool in scope",
			[]Pool{orgPool("org", "acme", "", "linux")}, JobTarget{Repository: "acme/app", Owner: "acme", Labels: []string{"self-hosted"}}, "org"},
		{"hosted-runner labels fit no pool",
			[]Pool{orgPool("org", "acme", "", "linux")}, JobTarget{Repository: "acme/app", Owner: "acme", Labels: []string{"ubuntu-latest"}}, ""},
		{"a user-owned repository only matches repository pools",
			[]Pool{orgPool("org", "alice", "", "linux"), entPool("ent", "big", "", "linux")}, JobTarget{Repository: "alice/dotfiles", Owner: "alice", OwnerIsUser: true, Enterprise: "big", Labels: []string{"linux"}}, ""},
		{"a user-owned repository with its own pool",
			[]Pool{orgPool("org", "alice", "", "linux"), repoPool("dotfiles", "alice/dotfiles", "linux")}, userJob, "dotfiles"},
		{"default runner group wins over a custom group at the same level",
			[]Pool{orgPool("a-custom", "acme", "ml", "linux"), orgPool("z-default", "acme", "", "linux")}, orgJob, "z-default"},
		{"a group named Default is the default group",
			[]Pool{orgPool("a-custom", "acme", "ml", "linux"), orgPool("z-default", "acme", "Default", "linux")}, orgJob, "z-default"},
		{"a custom-group pool serves when no default-group pool fits",
			[]Pool{orgPool("custom", "acme", "ml", "linux"), orgPool("default", "acme", "", "windows")}, orgJob, "custom"},
		{"a custom-group organization pool still wins over a default-group enterprise pool",
			[]Pool{orgPool("custom", "acme", "ml", "linux"), entPool("ent", "big", "", "linux")}, orgJob, "custom"},
		{"ties go to the first name",
			[]Pool{orgPool("pool-c", "acme", "", "linux"), orgPool("pool-a", "acme", "", "linux"), orgPool("pool-b", "acme", "", "linux")}, orgJob, "pool-a"},
		{"no pools", nil, orgJob, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := Route(tt.pools, tt.job)
			if tt.want == "" {
				if ok {
					t.Errorf("routed to %q, want no pool", got.Name)
				}
				return
			}
			if !ok || got.Name != tt.want {
				t.Errorf("routed to %q (ok %v), want %q", got.Name, ok, tt.want)
			}
			// Order of the table must not matter.
			rev := append([]Pool(nil), tt.pools...)
			for i, j := 0, len(rev)-1; i < j; i, j = i+1, j-1 {
				rev[i], rev[j] = rev[j], rev[i]
			}
			if again, _ := Route(rev, tt.job); again.Name != got.Name {
				t.Errorf("reversed table routed to %q, want %q", again.Name, got.Name)
			}
		})
	}
}

func TestParseScope(t *testing.T) {
	for _, s := range []workflows.Scope{{Repository: "acme/app"}, {Organization: "acme"}, {Enterprise: "big-corp"}} {
		got, err := ParseScope(s.String())
		if err != nil || got != s {
			t.Errorf("ParseScope(%q) = %+v, %v; want %+v", s.String(), got, err, s)
		}
	}
	for _, bad := range []string{"", "acme", "org:", "repo:acme", "repo:/app", "repo:acme/", "team:x", ":x"} {
		if got, err := ParseScope(bad); err == nil {
			t.Errorf("ParseScope(%q) = %+v, want an error", bad, got)
		}
	}
}
