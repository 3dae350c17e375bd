package jobgraph

import (
	"slices"
	"strings"

	"github.com/rhysd/actionlint"
)

// matrixSize counts the jobs a strategy's matrix expands to, as GitHub expands it: the product
// of its rows, less the combinations an exclude entry matches, plus each include entry that
// fits none of the remaining combinations (an entry fits a combination when it overwrites none
// of the combination's row values; one that fits is merged into it and adds no job).
func matrixSize(st *actionlint.Strategy) Matrix {
	if st == nil || st.Matrix == nil {
		return Matrix{Size: 1}
	}
	m := st.Matrix
	if m.Expression != nil || hasExpression(m.Include) || hasExpression(m.Exclude) {
		return Matrix{Unknown: true}
	}
	combos, ok := product(m.Rows)
	if !ok {
		return Matrix{Unknown: true}
	}
	if m.Exclude != nil {
		combos = slices.DeleteFunc(combos, func(c combination) bool {
			return slices.ContainsFunc(m.Exclude.Combinations, func(ex *actionlint.MatrixCombination) bool {
				return c.matches(ex, func(string) bool { return true })
			})
		})
	}
	size := len(combos)
	if m.Include != nil {
		isRow := func(key string) bool { _, ok := m.Rows[key]; return ok }
		for _, in := range m.Include.Combinations {
			if !slices.ContainsFunc(combos, func(c combination) bool { return c.matches(in, isRow) }) {
				size++
			}
		}
	}
	return Matrix{Size: size}
}

// combination is one assignment of a value to each matrix row, by lower-cased row name.
type combination map[string]actionlint.RawYAMLValue

// product is every combination of the rows' values; false when a row is an expression.
func product(rows map[string]*actionlint.MatrixRow) ([]combination, bool) {
	if len(rows) == 0 {
		return nil, true
	}
	combos := []combination{{}}
	for name, row := range rows {
		if row == nil || row.Expression != nil {
			return nil, false
		}
		next := make([]combination, 0, len(combos)*len(row.Values))
		for _, c := range combos {
			for _, v := range row.Values {
				nc := make(combination, len(c)+1)
				for k, cv := range c {
					nc[k] = cv
				}
				nc[strings.ToLower(name)] = v
				next = append(next, nc)
			}
		}
		combos = next
	}
	return combos, true
}

// matches reports whether every assignment of the entry whose key counts agrees with the
// combination: an exclude entry's keys all count; an include entry's count where they are
// rows of the matrix (other keys only add values).
func (c combination) matches(entry *actionlint.MatrixCombination, counts func(key string) bool) bool {
	for key, a := range entry.Assigns {
		key = strings.ToLower(key)
		if !counts(key) {
			continue
		}
		have, ok := c[key]
		if !ok || a == nil || !have.Equals(a.Value) {
			return false
		}
	}
	return true
}

// hasExpression reports whether include or exclude, one of its entries, or one of their
// values is an expression: what it matches is known only at run time.
func hasExpression(cs *actionlint.MatrixCombinations) bool {
	if cs == nil {
		return false
	}
	if cs.ContainsExpression() {
		return true
	}
	for _, c := range cs.Combinations {
		for _, a := range c.Assigns {
			if a != nil && a.Value != nil && actionlint.ContainsExpression(a.Value.String()) {
				return true
			}
		}
	}
	return false
}
