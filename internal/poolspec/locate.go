package poolspec

import (
	"encoding/json"
	"errors"
	"reflect"
	"regexp"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
	sigsjson "sigs.k8s.io/json"
)

// located is where a value that failed to decode went wrong: the path, the JSON found there,
// the Go type expected there and the decoder's error.
type located struct {
	path  *field.Path
	value []byte
	want  reflect.Type
	err   error
}

// locate finds where a value that failed to decode went wrong. Errors from types with their
// own decoding (durations, times, quantities) carry no path, so it decodes the value piece by
// piece, following the Go type, down to the smallest piece that still fails.
func locate(data []byte, into any, path *field.Path) located {
	if l, ok := locateType(data, reflect.TypeOf(into).Elem(), path); ok {
		return l
	}
	return located{path: path, value: data, want: reflect.TypeOf(into).Elem()}
}

func locateType(data []byte, t reflect.Type, path *field.Path) (located, bool) {
	err := sigsjson.UnmarshalCaseSensitivePreserveInts(data, reflect.New(t).Interface())
	if err == nil {
		return located{}, false
	}
	inner := t
	for inner.Kind() == reflect.Pointer {
		inner = inner.Elem()
	}
	switch inner.Kind() {
	case reflect.Struct:
		var obj map[string]json.RawMessage
		if json.Unmarshal(data, &obj) == nil {
			for _, key := range sortedKeys(obj) {
				if ft, ok := fieldType(inner, key); ok {
					if l, ok := locateType(obj[key], ft, path.Child(key)); ok {
						return l, true
					}
				}
			}
		}
	case reflect.Slice, reflect.Array:
		var list []json.RawMessage
		if json.Unmarshal(data, &list) == nil {
			for i, item := range list {
				if l, ok := locateType(item, inner.Elem(), path.Index(i)); ok {
					return l, true
				}
			}
		}
	case reflect.Map:
		var obj map[string]json.RawMessage
		if json.Unmarshal(data, &obj) == nil {
			for _, key := range sortedKeys(obj) {
				if l, ok := locateType(obj[key], inner.Elem(), path.Key(key)); ok {
					return l, true
				}
			}
		}
	}
	return located{path: path, value: data, want: inner, err: err}, true
}

// fieldType returns the type of the struct field that decodes JSON key, looking into embedded
// (inline) structs as encoding/json does.
func fieldType(t reflect.Type, key string) (reflect.Type, bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" || !f.IsExported() && !f.Anonymous {
			continue
		}
		if f.Anonymous && name == "" {
			inner := f.Type
			if inner.Kind() == reflect.Pointer {
				inner = inner.Elem()
			}
			if inner.Kind() == reflect.Struct {
				if ft, ok := fieldType(inner, key); ok {
					return ft, true
				}
				continue
			}
		}
		if name == "" {
			name = f.Name
		}
		if name == key {
			return f.Type, true
		}
	}
	return nil, false
}

func sortedKeys(m map[string]json.RawMessage) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

var typeError = regexp.MustCompile(`cannot unmarshal (\w+) into Go (?:struct field \S+|value) of type (\S+)`)

// reason turns a decoding failure into a reason a person can act on.
func (l located) reason() string {
	if l.err == nil {
		return "cannot be decoded"
	}
	if m := typeError.FindStringSubmatch(l.err.Error()); m != nil {
		return "must be " + kindName(l.want) + ", not " + jsonKindName(m[1])
	}
	var syn *json.SyntaxError
	if errors.As(l.err, &syn) {
		return "is not valid JSON: " + l.err.Error()
	}
	return strings.TrimPrefix(l.err.Error(), "json: ")
}

// kindName names what a Go type expects in YAML terms.
func kindName(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.Map, reflect.Struct:
		return "a mapping"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	}
	return "a " + t.String()
}

func jsonKindName(k string) string {
	switch k {
	case "object":
		return "a mapping"
	case "array":
		return "a list"
	case "bool":
		return "true/false"
	}
	return "a " + k
}

// shortValue is the value found at a located path, shortened for messages.
func (l located) shortValue() any {
	const maxLen = 60
	var v any
	if json.Unmarshal(l.value, &v) == nil {
		if str, ok := v.(string); ok {
			if len(str) > maxLen {
				str = str[:maxLen] + "..."
			}
			return str
		}
	}
	if len(l.value) > maxLen {
		return string(l.value[:maxLen]) + "..."
	}
	return json.RawMessage(l.value)
}
