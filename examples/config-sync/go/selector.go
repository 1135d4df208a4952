// spec.namespaceSelector as the label-selector string the host's cache takes, with the API
// server's validation of keys, values and operators (a bad selector is an InvalidSpec naming the
// field, never a selector that silently matches something else).

package main

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// toQuery is the selector as a query string ("" selects every namespace): matchLabels first,
// sorted by key, then matchExpressions in order, each one's values sorted and deduplicated.
func toQuery(s LabelSelector) (string, error) {
	var terms []string
	keys := make([]string, 0, len(s.MatchLabels))
	for k := range s.MatchLabels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, key := range keys {
		value := s.MatchLabels[key]
		field := fmt.Sprintf("spec.namespaceSelector.matchLabels[%s]", strconv.Quote(key))
		if why := checkKey(key); why != "" {
			return "", fmt.Errorf("%s: invalid label key %s: %s", field, strconv.Quote(key), why)
		}
		if why := checkValue(value); why != "" {
			return "", fmt.Errorf("%s: invalid label value %s: %s", field, strconv.Quote(value), why)
		}
		terms = append(terms, key+"="+value)
	}
	for i, r := range s.MatchExpressions {
		field := fmt.Sprintf("spec.namespaceSelector.matchExpressions[%d]", i)
		if why := checkKey(r.Key); why != "" {
			return "", fmt.Errorf("%s.key: invalid label key %s: %s", field, strconv.Quote(r.Key), why)
		}
		values := append([]string(nil), r.Values...)
		sort.Strings(values)
		values = dedup(values)
		for _, v := range values {
			if why := checkValue(v); why != "" {
				return "", fmt.Errorf("%s.values: invalid label value %s: %s", field, strconv.Quote(v), why)
			}
		}
		set := "(" + strings.Join(values, ",") + ")"
		switch {
		case (r.Operator == "In" || r.Operator == "NotIn") && len(values) == 0:
			return "", fmt.Errorf("%s.values: must be non-empty when operator is %s", field, r.Operator)
		case (r.Operator == "Exists" || r.Operator == "DoesNotExist") && len(values) > 0:
			return "", fmt.Errorf("%s.values: must be empty when operator is %s", field, r.Operator)
		case r.Operator == "In":
			terms = append(terms, r.Key+" in "+set)
		case r.Operator == "NotIn":
			terms = append(terms, r.Key+" notin "+set)
		case r.Operator == "Exists":
			terms = append(terms, r.Key)
		case r.Operator == "DoesNotExist":
			terms = append(terms, "!"+r.Key)
		default:
			return "", fmt.Errorf("%s.operator: %s is not a valid operator (In, NotIn, Exists or DoesNotExist)", field, strconv.Quote(r.Operator))
		}
	}
	return strings.Join(terms, ","), nil
}

func dedup(sorted []string) []string {
	out := sorted[:0]
	for i, v := range sorted {
		if i == 0 || v != sorted[i-1] {
			out = append(out, v)
		}
	}
	return out
}

func checkKey(key string) string {
	name := key
	if p, n, ok := strings.Cut(key, "/"); ok {
		if why := checkDNSSubdomain(p); why != "" {
			return "prefix part " + why
		}
		name = n
	}
	if name == "" {
		return "name part must be non-empty"
	}
	if why := checkNamePart(name); why != "" {
		return "name part " + why
	}
	return ""
}

func checkValue(v string) string {
	if v == "" {
		return ""
	}
	return checkNamePart(v)
}

func alnum(b byte) bool { return b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' }

func checkNamePart(s string) string {
	if len(s) > 63 {
		return "must be no more than 63 characters"
	}
	ok := len(s) > 0 && alnum(s[0]) && alnum(s[len(s)-1])
	for i := 0; ok && i < len(s); i++ {
		ok = alnum(s[i]) || s[i] == '-' || s[i] == '_' || s[i] == '.'
	}
	if !ok {
		return "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"
	}
	return ""
}

func checkDNSSubdomain(s string) string {
	if len(s) > 253 {
		return "must be no more than 253 characters"
	}
	for _, l := range strings.Split(s, ".") {
		ok := l != "" && l[0] != '-' && l[len(l)-1] != '-'
		for i := 0; ok && i < len(l); i++ {
			ok = l[i] >= 'a' && l[i] <= 'z' || l[i] >= '0' && l[i] <= '9' || l[i] == '-'
		}
		if !ok {
			return "must be a lowercase RFC 1123 subdomain: lower case alphanumeric characters, '-' or '.', starting and ending with an alphanumeric character"
		}
	}
	return ""
}

func isDNSLabel(s string) bool {
	return len(s) <= 63 && checkDNSSubdomain(s) == "" && !strings.Contains(s, ".")
}

func isDNSSubdomain(s string) bool { return checkDNSSubdomain(s) == "" }
