package guest

import (
	"errors"
	"slices"
	"strings"
)

// selector is a label selector in the API server's string syntax, parsed as the host parses it
// (host/src/watch/selector.rs), for FakeCache.Query.
type selector []requirement

type requirement struct {
	key    string
	op     string // "=", "!=", "in", "notin", "exists", "!"
	values []string
}

func parseSelector(input string) (selector, error) {
	parts, err := splitTopLevel(input)
	if err != nil {
		return nil, err
	}
	var sel selector
	for _, part := range parts {
		part = strings.TrimSpace(part)
		if part == "" {
			if strings.TrimSpace(input) == "" {
				continue
			}
			return nil, errors.New("empty requirement")
		}
		r, err := parseRequirement(part)
		if err != nil {
			return nil, err
		}
		sel = append(sel, r)
	}
	return sel, nil
}

func (s selector) matches(labels map[string]string) bool {
	for _, r := range s {
		v, ok := labels[r.key]
		var m bool
		switch r.op {
		case "=":
			m = ok && v == r.values[0]
		case "!=":
			m = !ok || v != r.values[0]
		case "in":
			m = ok && slices.Contains(r.values, v)
		case "notin":
			m = !ok || !slices.Contains(r.values, v)
		case "exists":
			m = ok
		case "!":
			m = !ok
		}
		if !m {
			return false
		}
	}
	return true
}

func splitTopLevel(s string) ([]string, error) {
	depth, start := 0, 0
	var out []string
	for i, c := range s {
		switch {
		case c == '(':
			depth++
		case c == ')':
			if depth--; depth < 0 {
				return nil, errors.New("unbalanced ')'")
			}
		case c == ',' && depth == 0:
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	if depth != 0 {
		return nil, errors.New("unbalanced '('")
	}
	return append(out, s[start:]), nil
}

// validKey: ASCII letters, digits and -_./ (Trim leaves something iff another byte is there).
func validKey(k string) bool {
	return k != "" && len(k) <= 317 && strings.Trim(k, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./") == ""
}

func validValue(v string) bool {
	return len(v) <= 63 && strings.Trim(v, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.") == ""
}

func parseRequirement(p string) (requirement, error) {
	if k, ok := strings.CutPrefix(p, "!"); ok {
		k = strings.TrimSpace(k)
		if !validKey(k) {
			return requirement{}, errors.New("invalid key")
		}
		return requirement{key: k, op: "!"}, nil
	}
	for _, op := range []string{"!=", "==", "="} {
		if k, v, ok := strings.Cut(p, op); ok {
			k, v = strings.TrimSpace(k), strings.TrimSpace(v)
			if !validKey(k) {
				return requirement{}, errors.New("invalid key")
			}
			if !validValue(v) {
				return requirement{}, errors.New("invalid value")
			}
			if op == "==" {
				op = "="
			}
			return requirement{key: k, op: op, values: []string{v}}, nil
		}
	}
	if i := strings.IndexFunc(p, isSpace); i >= 0 {
		k, rest := strings.TrimSpace(p[:i]), strings.TrimSpace(p[i+1:])
		op := "in"
		set, ok := strings.CutPrefix(rest, "notin")
		if ok {
			op = "notin"
		} else if set, ok = strings.CutPrefix(rest, "in"); !ok {
			return requirement{}, errors.New("expected '=', '!=', 'in' or 'notin'")
		}
		set = strings.TrimSpace(set)
		if len(set) < 2 || set[0] != '(' || set[len(set)-1] != ')' {
			return requirement{}, errors.New("expected '(values)'")
		}
		var values []string
		for _, v := range strings.Split(set[1:len(set)-1], ",") {
			values = append(values, strings.TrimSpace(v))
		}
		if !validKey(k) {
			return requirement{}, errors.New("invalid key")
		}
		for _, v := range values {
			if !validValue(v) {
				return requirement{}, errors.New("invalid value")
			}
		}
		return requirement{key: k, op: op, values: values}, nil
	}
	if !validKey(p) {
		return requirement{}, errors.New("invalid key")
	}
	return requirement{key: p, op: "exists"}, nil
}

func isSpace(r rune) bool {
	return r == ' ' || r == '\t' || r == '\n' || r == '\r' || r == '\f' || r == '\v'
}
