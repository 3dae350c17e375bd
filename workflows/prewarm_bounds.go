package workflows

import (
	"encoding/json"
	"slices"
	"strings"
	"unicode/utf8"
)

// What a prewarming pool keeps of a run's graph and of the names it hears is bounded, so its
// state stays within PrewarmStateBytesMax whatever a workflow file or an event holds: each
// string is measured as JSON writes it and kept whole, cut, or refused.

// boundRunGraph is the graph as the pool's state keeps it: what Predict reads, each string
// within PrewarmGraphTextMax (as JSON writes it), or false when it cannot be kept
// (PrewarmGraphTooLarge). A name over it is kept cut and marked NameUnknown (its events
// cannot be told to be the job's), labels over it or over PrewarmGraphLabelsMax are dropped
// (LabelsCut), an if: is kept cut; an id or a need over it, or the whole over
// PrewarmGraphBytesMax, refuses the graph. The graph given is not modified.
func boundRunGraph(g RunGraph) (RunGraph, bool) {
	out := RunGraph{Jobs: make([]RunGraphJob, 0, len(g.Jobs))}
	for _, j := range g.Jobs {
		if !textFits(j.ID) || slices.ContainsFunc(j.Needs, func(n string) bool { return !textFits(n) }) {
			return RunGraph{}, false
		}
		k := RunGraphJob{ID: j.ID, Needs: slices.Clone(j.Needs), LabelsKnown: j.LabelsKnown, LabelsCut: j.LabelsCut, Instances: j.Instances}
		var whole bool
		k.Name, whole = capText(j.Name, PrewarmGraphTextMax, "…")
		k.NameUnknown = j.NameUnknown || !whole
		k.If, _ = capText(j.If, PrewarmGraphTextMax, "…")
		if k.LabelsKnown {
			if len(j.Labels) > PrewarmGraphLabelsMax || slices.ContainsFunc(j.Labels, func(l string) bool { return !textFits(l) }) {
				k.LabelsKnown, k.LabelsCut = false, true
			} else {
				k.Labels = slices.Clone(j.Labels)
			}
		}
		out.Jobs = append(out.Jobs, k)
	}
	if b, err := json.Marshal(out); err != nil || len(b) > PrewarmGraphBytesMax {
		return RunGraph{}, false
	}
	return out, true
}

// textFits reports whether s takes at most PrewarmGraphTextMax bytes as JSON.
func textFits(s string) bool { return textFitsIn(s, PrewarmGraphTextMax) }

// textFitsIn reports whether s takes at most limit bytes as JSON.
func textFitsIn(s string, limit int) bool {
	_, whole := capText(s, limit, "")
	return whole
}

// capText is s when it takes at most limit bytes as JSON (encoding/json's escapes counted),
// with true; else its longest prefix that, end after it, does, with false.
func capText(s string, limit int, end string) (string, bool) {
	total := 0
	for _, r := range s {
		total += jsonCost(r)
	}
	if total <= limit {
		return s, true
	}
	budget := limit
	for _, r := range end {
		budget -= jsonCost(r)
	}
	used := 0
	for i, r := range s {
		if used+jsonCost(r) > budget {
			return s[:i] + end, false
		}
		used += jsonCost(r)
	}
	return s + end, false // not reached: s is over limit
}

// jsonCost is at least the bytes encoding/json writes for the rune in a string: six for what
// it escapes as \u00XX (and an invalid byte, written \ufffd).
func jsonCost(r rune) int {
	switch {
	case r == '"' || r == '\\':
		return 2
	case r < 0x20 || r == '<' || r == '>' || r == '&' || r == '\u2028' || r == '\u2029' || r == utf8.RuneError:
		return 6
	}
	return utf8.RuneLen(r)
}

// seenName is a heard job's name as the state keeps it (PrewarmSeenNameMax): a name cut
// keeps its closing parenthesis after the cut, so that graphJobOf maps it as it maps the
// whole name (to a matrix instance's job, or to none).
func seenName(name string) string {
	end := "…"
	if strings.HasSuffix(name, ")") {
		end = "…)"
	}
	kept, _ := capText(name, PrewarmSeenNameMax, end)
	return kept
}
