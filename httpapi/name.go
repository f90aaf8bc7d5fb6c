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
	bad := func(why string) error {
		shown := name
		if len(shown) > 80 { // a long name is not echoed whole
			shown = strings.ToValidUTF8(shown[:80], "") + "…"
		}
		return badRequest("invalid index name %s: %s", strconv.QuoteToASCII(shown), why)
	}
	switch {
	case name == "":
		return bad("empty")
	case !utf8.ValidString(name):
		return bad("not valid UTF-8")
	case len(name) > maxNameBytes:
		return bad(fmt.Sprintf("%d bytes, at most %d", len(name), maxNameBytes))
	case name == "." || name == "..":
		return bad("reserved")
	case strings.IndexAny(name[:1], "_-+") == 0:
		return bad("must not start with _, - or +")
	}
	for _, r := range name {
		// Cf: invisible (zero-width, bidi) characters; the other default
		// ignorables (U+034F, Hangul fillers, variation selectors) are
		// invisible too.
		if strings.ContainsRune(`/\*?"<>|,#:`, r) || unicode.IsSpace(r) || unicode.IsControl(r) ||
			unicode.Is(unicode.Cf, r) || unicode.Is(unicode.Other_Default_Ignorable_Code_Point, r) ||
			unicode.Is(unicode.Variation_Selector, r) || r == utf8.RuneError {
			return bad("character " + strconv.QuoteRuneToASCII(r) + " is not allowed")
		}
	}
	return nil
}
