// Names in messages are quoted as the Rust guest quotes them (`{:?}`), so every port of
// guest-foo writes the same messages (tests/fixtures/foo/README.md).

package main

import (
	"sort"
	"strconv"
	"strings"
)

// runStarts[i] is the first code point of run i of escapedRuns; odd runs are escaped.
var runStarts = func() []rune {
	var starts []rune
	at := rune(0)
	for _, r := range strings.Split(escapedRuns, ",") {
		n, err := strconv.ParseInt(r, 36, 32)
		if err != nil {
			panic("unicode_table.go: " + err.Error())
		}
		starts = append(starts, at)
		at += rune(n)
	}
	return starts
}()

func escapedAsUnicode(c rune) bool {
	i := sort.Search(len(runStarts), func(i int) bool { return runStarts[i] > c }) - 1
	return i&1 == 1
}

// debugQuote is Rust's format!("{s:?}"): double quotes; \0 \t \r \n \\ \" escaped; \u{..} for
// Grapheme_Extend and unprintable characters; everything else as is.
func debugQuote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, c := range s {
		switch c {
		case 0:
			b.WriteString(`\0`)
		case '\t':
			b.WriteString(`\t`)
		case '\r':
			b.WriteString(`\r`)
		case '\n':
			b.WriteString(`\n`)
		case '\\':
			b.WriteString(`\\`)
		case '"':
			b.WriteString(`\"`)
		default:
			if escapedAsUnicode(c) {
				b.WriteString(`\u{` + strconv.FormatInt(int64(c), 16) + `}`)
			} else {
				b.WriteRune(c)
			}
		}
	}
	b.WriteByte('"')
	return b.String()
}
