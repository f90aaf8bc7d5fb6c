package s3_test

import (
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/faiss-sidecar/faiss-sidecar/partial"
	"github.com/faiss-sidecar/faiss-sidecar/partial/s3"
)

// TestParseURLRules: what an object path may be, each refusal saying why.
func TestParseURLRules(t *testing.T) {
	for u, why := range map[string]string{
		"s3://":                                  "bucket and key both non-empty",
		"s3://bkt":                               "bucket and key both non-empty",
		"s3://bkt/":                              "bucket and key both non-empty",
		"s3:///key":                              "bucket and key both non-empty",
		"/local/file":                            "not an s3://BUCKET/KEY path",
		"S3://bkt/key":                           "not an s3://BUCKET/KEY path",
		"s3://ab/key":                            "3 to 63",
		"s3://" + strings.Repeat("b", 64) + "/k": "3 to 63",
		"s3://bk t/key":                          `holds " "`,
		"s3://bkt\x00/key":                       `holds "\x00"`,
		"s3://-bkt/key":                          "start and end with a letter or digit",
		"s3://bkt./key":                          "start and end with a letter or digit",
		"s3://b\xffk/key":                        `holds "\xff"`,
		"s3://bkt/a\x00b":                        "control character",
		"s3://bkt/a\nb":                          "control character",
		"s3://bkt/a\u0085b":                      "control character",
		"s3://bkt/a\xffb":                        "not valid UTF-8",
		"s3://bkt/" + strings.Repeat("k", 1025):  "1025 bytes long, S3's limit is 1024",
		"s3://bkt/../other/key":                  `".." segment`,
		"s3://bkt/a/../../other/key":             `".." segment`,
		"s3://bkt/a/./b":                         `"." segment`,
		"s3://bkt/..":                            `".." segment`,
	} {
		_, _, err := s3.ParseURL(u)
		require.ErrorIs(t, err, partial.ErrBadOption, "%q", u)
		var ue *s3.URLError
		require.ErrorAs(t, err, &ue, "%q", u)
		assert.Contains(t, ue.Reason, why, "%q", u)
		assert.False(t, strings.HasPrefix(err.Error(), partial.ErrBadOption.Error()), "%q: the path and why, without the kind's name: %v", u, err)
		assert.Less(t, len(err.Error()), 600, "an absurd path is not quoted whole")
	}
	for u, want := range map[string][2]string{
		"s3://bkt/a/b/c.faiss":                  {"bkt", "a/b/c.faiss"},
		"s3://My_Legacy.Bucket-1/x":             {"My_Legacy.Bucket-1", "x"},
		"s3://bkt/..a/b../.../ü ñ.faiss":        {"bkt", "..a/b../.../ü ñ.faiss"},
		"s3://bkt//double//slash":               {"bkt", "/double//slash"},
		"s3://bkt/" + strings.Repeat("k", 1024): {"bkt", strings.Repeat("k", 1024)},
	} {
		b, k, err := s3.ParseURL(u)
		require.NoError(t, err, "%q", u)
		assert.Equal(t, want, [2]string{b, k})
	}
	require.NoError(t, s3.CheckBucket("abc"))
	require.Error(t, s3.CheckBucket(""))
}

// FuzzParseURL: any string either parses into a bucket and key that obey
// the rules and put back together give the input, or is refused with an
// error wrapping partial.ErrBadOption; never a panic.
//
//	go test -run='^$' -fuzz=FuzzParseURL -fuzztime=1m ./partial/s3
func FuzzParseURL(f *testing.F) {
	for _, s := range []string{"s3://bkt/key", "s3://bkt/a/../b", "s3://b/k", "s3://bkt/\x00", "s3://bkt//k", "/etc/passwd", "s3://bkt/./k", "s3://bkt/é"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, u string) {
		b, k, err := s3.ParseURL(u)
		if err != nil {
			require.ErrorIs(t, err, partial.ErrBadOption)
			require.Empty(t, b)
			require.Empty(t, k)
			return
		}
		require.Equal(t, u, "s3://"+b+"/"+k)
		require.NoError(t, s3.CheckBucket(b))
		require.True(t, utf8.ValidString(k))
		require.LessOrEqual(t, len(k), s3.MaxKeyBytes)
		require.Negative(t, strings.IndexFunc(k, unicode.IsControl))
		for seg := range strings.SplitSeq(k, "/") {
			require.NotContains(t, []string{".", ".."}, seg)
		}
	})
}
