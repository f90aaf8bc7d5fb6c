package httpapi

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// maxNameBytes is the longest index name, as OpenSearch's.
const maxNameBytes = 255

// checkName enforces a safe index name, like OpenSearch's: valid UTF-8, at
// most 255 bytes, none of / \ * ? " < > | , # or white space or control
// characters, not "." or "..", not starting with _, - or +.
func checkName(name string) error {
	if why := nameProblem(name, false); why != "" {
		return badRequest("invalid index name %s: %s", quoteName(name), why)
	}
	return nil
}

// quoteName quotes a name for an error, a long one cut.
func quoteName(name string) string {
	if len(name) > 80 { // a long name is not echoed whole
		name = strings.ToValidUTF8(name[:80], "") + "…"
	}
	return strconv.QuoteToASCII(name)
}

// nameProblem says why name is not a valid index (or alias) name, "" when
// it is; with wildcard, '*' is allowed (a pattern of names).
func nameProblem(name string, wildcard bool) string {
	switch {
	case name == "":
		return "empty"
	case !utf8.ValidString(name):
		return "not valid UTF-8"
	case len(name) > maxNameBytes:
		return fmt.Sprintf("%d bytes, at most %d", len(name), maxNameBytes)
	case name == "." || name == "..":
		return "reserved"
	case strings.IndexAny(name[:1], "_-+") == 0:
		return "must not start with _, - or +"
	}
	for _, r := range name {
		if wildcard && r == '*' {
			continue
		}
		// Cf: invisible (zero-width, bidi) characters; the other default
		// ignorables (U+034F, Hangul fillers, variation selectors) are
		// invisible too.
		if strings.ContainsRune(`/\*?"<>|,#:`, r) || unicode.IsSpace(r) || unicode.IsControl(r) ||
			unicode.Is(unicode.Cf, r) || unicode.Is(unicode.Other_Default_Ignorable_Code_Point, r) ||
			unicode.Is(unicode.Variation_Selector, r) || r == utf8.RuneError {
			return "character " + strconv.QuoteRuneToASCII(r) + " is not allowed"
		}
	}
	return ""
}
