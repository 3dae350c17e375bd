// Package poolspec reads pool files: YAML holding one or more pools, decoded strictly (unknown
// or duplicate fields are errors), defaulted and validated. Every problem is reported with its
// field path, and a file with any problem yields no pools at all, so `starter apply` starts
// nothing from a half-valid file.
//
// A file is a YAML stream: documents separated by "---", each either one pool or a mapping with
// a single "pools:" list. Pools are numbered in file order across documents — pools[0],
// pools[1], ... — and error paths use that numbering.
package poolspec

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"github.com/runnerflow/runnerflow/workflows"
)

// Error lists every problem found in a pools file, one line each with its field path.
type Error struct {
	Problems []string
}

func (e *Error) Error() string {
	return "invalid pools file:\n  " + strings.Join(e.Problems, "\n  ")
}

// ReadFile reads and parses a pools file; "-" reads standard input.
func ReadFile(path string) ([]workflows.PoolSpec, error) {
	var data []byte
	var err error
	if path == "-" {
		data, err = readAll(os.Stdin)
	} else {
		data, err = os.ReadFile(path)
	}
	if err != nil {
		return nil, err
	}
	return Parse(data)
}

func readAll(f *os.File) ([]byte, error) {
	var buf bytes.Buffer
	_, err := buf.ReadFrom(f)
	return buf.Bytes(), err
}

// Parse decodes, defaults and validates every pool in data. It returns the defaulted pools, or
// an *Error naming every problem and no pools.
func Parse(data []byte) ([]workflows.PoolSpec, error) {
	p := &parser{}
	for _, doc := range splitDocuments(data) {
		p.document(doc)
	}
	if len(p.problems) == 0 && len(p.pools) == 0 {
		p.problems = append(p.problems, "no pools found")
	}
	names, sets := map[string]int{}, map[string]int{}
	for n, spec := range p.pools {
		i := p.index[n]
		path := field.NewPath("pools").Index(i)
		p.fieldErrors(spec.ValidateNew(path))
		if first, dup := names[spec.Name]; dup && spec.Name != "" {
			p.fieldErrors(field.ErrorList{field.Duplicate(path.Child("name"), fmt.Sprintf("%s (also pools[%d].name)", spec.Name, first))})
		}
		names[spec.Name] = i
		p.uniqueScaleSet(sets, spec, i)
	}
	if len(p.problems) > 0 {
		return nil, &Error{Problems: p.problems}
	}
	return p.pools, nil
}

// uniqueScaleSet reports a scale set named twice in one scope and runner group: GitHub keeps
// one set per name there, so two pools would fight over it. sets maps each set seen to its pool.
func (p *parser) uniqueScaleSet(sets map[string]int, spec workflows.PoolSpec, i int) {
	if spec.ScaleSet == nil || spec.ScaleSet.Name == "" {
		return
	}
	sc := spec.Scope()
	key := strings.ToLower(strings.Join([]string{sc.Repository, sc.Organization, sc.Enterprise, spec.RunnerGroup, spec.ScaleSet.Name}, "\x00"))
	if first, dup := sets[key]; dup {
		path := field.NewPath("pools").Index(i).Child("scaleSet", "name")
		p.fieldErrors(field.ErrorList{field.Duplicate(path, fmt.Sprintf("%s (also pools[%d]'s scale set, in the same scope and runner group)", spec.ScaleSet.Name, first))})
		return
	}
	sets[key] = i
}

type parser struct {
	pools []workflows.PoolSpec
	// index is each decoded pool's position in the file (pools that failed to decode count).
	index    []int
	next     int
	problems []string
}

func (p *parser) fieldErrors(errs field.ErrorList) {
	for _, e := range errs {
		p.problems = append(p.problems, e.Error())
	}
}

// document decodes one YAML document: a pool, or a "pools:" list.
func (p *parser) document(doc document) {
	js, err := yaml.YAMLToJSONStrict(doc.text)
	if err != nil {
		p.problems = append(p.problems, doc.yamlError(err))
		return
	}
	js = bytes.TrimSpace(js)
	if len(js) == 0 || string(js) == "null" {
		return // an empty document, e.g. after a trailing "---"
	}
	var top map[string]json.RawMessage
	if json.Unmarshal(js, &top) != nil {
		p.problems = append(p.problems, fmt.Sprintf("document at line %d: must be a pool (a mapping with name, labels, ...) or a mapping with a pools: list", doc.line))
		return
	}
	if _, ok := top["pools"]; !ok {
		p.pool(js)
		return
	}
	for _, key := range sortedKeys(top) {
		if key != "pools" {
			p.problems = append(p.problems, fmt.Sprintf("document at line %d: %s: unknown field (a document with a pools: list holds nothing else)", doc.line, key))
		}
	}
	var list []json.RawMessage
	if err := json.Unmarshal(top["pools"], &list); err != nil {
		p.problems = append(p.problems, fmt.Sprintf("document at line %d: pools: must be a list of pools", doc.line))
		return
	}
	for _, raw := range list {
		p.pool(raw)
	}
}

func (p *parser) pool(raw []byte) {
	i := p.next
	p.next++
	var spec workflows.PoolSpec
	if errs := decodeStrict(raw, &spec, field.NewPath("pools").Index(i)); len(errs) > 0 {
		p.fieldErrors(errs)
		return
	}
	p.pools = append(p.pools, spec.WithDefaults())
	p.index = append(p.index, i)
}

// decodeStrict decodes JSON case-sensitively, refusing unknown and duplicate fields, and turns
// every failure into a field error with its full path.
func decodeStrict(data []byte, into any, path *field.Path) field.ErrorList {
	strict, err := sigsjson.UnmarshalStrict(data, into)
	if err != nil {
		l := locate(data, into, path)
		return field.ErrorList{field.Invalid(l.path, l.shortValue(), l.reason())}
	}
	var errs field.ErrorList
	for _, e := range strict {
		fe, ok := e.(sigsjson.FieldError)
		if !ok {
			errs = append(errs, field.Invalid(path, nil, e.Error()))
			continue
		}
		at := join(path, fe.FieldPath())
		if strings.HasPrefix(e.Error(), "duplicate field") {
			errs = append(errs, field.Duplicate(at, "(the key appears twice)"))
		} else {
			errs = append(errs, field.Forbidden(at, "unknown field (field names are case-sensitive)"))
		}
	}
	return errs
}

// join appends a dotted JSON path such as "template.spec.containers[0].foo" to path.
func join(path *field.Path, dotted string) *field.Path {
	return path.Child(dotted)
}

// document is one YAML document of a stream and the file line it starts on.
type document struct {
	text []byte
	line int
}

var yamlLine = regexp.MustCompile(`line (\d+)`)

// yamlError rewrites a YAML error's document-relative line numbers into file line numbers.
func (d document) yamlError(err error) string {
	msg := yamlLine.ReplaceAllStringFunc(err.Error(), func(m string) string {
		n, _ := strconv.Atoi(strings.TrimPrefix(m, "line "))
		return "line " + strconv.Itoa(n+d.line-1)
	})
	return "YAML: " + strings.TrimPrefix(strings.TrimPrefix(msg, "error converting YAML to JSON: "), "yaml: ")
}

var separator = regexp.MustCompile(`^---(\s.*)?$`)

// splitDocuments splits a YAML stream at "---" lines, remembering where each document starts.
func splitDocuments(data []byte) []document {
	var docs []document
	cur := document{line: 1}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64*1024), len(data)+1)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if separator.MatchString(strings.TrimRight(line, " \t\r")) {
			docs = append(docs, cur)
			cur = document{line: n + 1}
			continue
		}
		cur.text = append(cur.text, line...)
		cur.text = append(cur.text, '\n')
	}
	return append(docs, cur)
}
