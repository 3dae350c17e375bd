package poolspec

import (
	"testing"
	"time"
)

func TestParsePrewarmSection(t *testing.T) {
	pools, err := Parse([]byte(validPool + "prewarm: {enabled: true, grace: 90s}\n"))
	if err != nil {
		t.Fatalf("Parse = %v, want the section accepted", err)
	}
	s := pools[0]
	if !s.PrewarmOn() || s.PrewarmGraceOrDefault() != 90*time.Second {
		t.Errorf("prewarm on = %v, grace %s; want on, 1m30s", s.PrewarmOn(), s.PrewarmGraceOrDefault())
	}
	plain, err := Parse([]byte(validPool))
	if err != nil {
		t.Fatal(err)
	}
	if plain[0].PrewarmOn() || plain[0].Prewarm != nil {
		t.Errorf("a pool without the section prewarms (%+v); want it off by default", plain[0].Prewarm)
	}
}

func TestParsePrewarmProblemsHaveFieldPaths(t *testing.T) {
	for _, tc := range []struct{ name, yaml, prefix, words string }{
		{"unknown field", "prewarm: {enabeld: true}\n", "pools[0].prewarm.enabeld", "unknown field"},
		{"persistent runners", "ephemeral: false\nprewarm: {enabled: true}\n", "pools[0].prewarm.enabled", "ephemeral"},
		{"negative grace", "prewarm: {enabled: true, grace: -1m}\n", "pools[0].prewarm.grace", "must be > 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if problems := problemsOf(t, validPool+tc.yaml); !hasProblem(problems, tc.prefix, tc.words) {
				t.Errorf("problems = %q, want one at %s saying %q", problems, tc.prefix, tc.words)
			}
		})
	}
}
