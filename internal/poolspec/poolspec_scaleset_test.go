package poolspec

import (
	"errors"
	"strings"
	"testing"
)

// problemsOf parses data and returns its problems (failing when it parsed).
func problemsOf(t *testing.T, data string) []string {
	t.Helper()
	_, err := Parse([]byte(data))
	var perr *Error
	if !errors.As(err, &perr) {
		t.Fatalf("Parse = %v, want an *Error", err)
	}
	return perr.Problems
}

func hasProblem(problems []string, prefix, words string) bool {
	for _, p := range problems {
		if strings.HasPrefix(p, prefix) && strings.Contains(p, words) {
			return true
		}
	}
	return false
}

func TestParseScaleSetSectionIsAccepted(t *testing.T) {
	if _, err := Parse([]byte(validPool + "scaleSet: {name: linux-set, keepOnDelete: true}\n")); err != nil {
		t.Errorf("Parse = %v, want the section accepted", err)
	}
}

func TestParseScaleSetProblemsHaveFieldPaths(t *testing.T) {
	for _, tc := range []struct{ name, yaml, prefix, words string }{
		{"unknown field", "scaleSet: {nmae: x}\n", "pools[0].scaleSet.nmae", "unknown field"},
		{"name with a space", "scaleSet: {name: \"linux set\"}\n", "pools[0].scaleSet.name", "whitespace"},
		{"persistent runners", "ephemeral: false\nscaleSet: {}\n", "pools[0].ephemeral", "just-in-time"},
		{"warm registrations", "warmRegistrations: 1\nscaleSet: {}\n", "pools[0].warmRegistrations", "scaleSet"},
		{"pull", "pull: {metric: PercentageRunnersBusy}\nscaleSet: {}\n", "pools[0].pull", "listener"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if problems := problemsOf(t, validPool+tc.yaml); !hasProblem(problems, tc.prefix, tc.words) {
				t.Errorf("problems = %q, want one at %s saying %q", problems, tc.prefix, tc.words)
			}
		})
	}
}

func TestParseScaleSetNamedTwiceInOneGroup(t *testing.T) {
	second := strings.Replace(validPool, "linux-small", "linux-large", 1)
	doc := validPool + "scaleSet: {name: shared}\n---\n" + second + "scaleSet: {name: Shared}\n"
	if problems := problemsOf(t, doc); !hasProblem(problems, "pools[1].scaleSet.name: Duplicate", "pools[0]") {
		t.Errorf("problems = %q, want the second set named a duplicate of pools[0]'s", problems)
	}
	other := strings.Replace(second, "organization: acme", "organization: other", 1)
	if _, err := Parse([]byte(validPool + "scaleSet: {name: shared}\n---\n" + other + "scaleSet: {name: shared}\n")); err != nil {
		t.Errorf("sets of one name in two organizations: %v, want them accepted", err)
	}
}
