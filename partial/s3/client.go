package s3

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/faiss-sidecar/faiss-sidecar/partial"
)

// Scheme prefixes every object path this backend serves.
const Scheme = "s3://"

// IsURL reports whether path names an object (s3://BUCKET/KEY) rather than
// a local file.
func IsURL(path string) bool { return strings.HasPrefix(path, Scheme) }

// Limits of an object path, S3's own: a bucket name of 3 to 63 bytes
// (MaxBucketBytes, lowercase letters, digits, dots and hyphens; legacy
// buckets also have capitals and underscores), a key of at most
// MaxKeyBytes bytes of UTF-8.
const (
	MaxBucketBytes = 63
	MaxKeyBytes    = 1024
)

// ParseURL splits s3://BUCKET/KEY. It refuses, with an error wrapping
// partial.ErrBadOption that says why: an empty bucket or key, a bucket
// name S3 would not accept (CheckBucket), a key longer than MaxKeyBytes,
// not UTF-8, holding a control character, or with a "." or ".." segment
// (keys are opaque to S3, but servers and proxies that clean URL paths
// would read another key, or another bucket).
func ParseURL(u string) (bucket, key string, err error) {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: %q: "+format, append([]any{partial.ErrBadOption, truncate(u)}, a...)...)
	}
	if !IsURL(u) {
		return "", "", bad("not an s3://BUCKET/KEY path")
	}
	bucket, key, _ = strings.Cut(strings.TrimPrefix(u, Scheme), "/")
	switch {
	case bucket == "" || key == "":
		return "", "", bad("an object path is s3://BUCKET/KEY (bucket and key both non-empty)")
	case len(key) > MaxKeyBytes:
		return "", "", bad("the key is %d bytes long, S3's limit is %d", len(key), MaxKeyBytes)
	case !utf8.ValidString(key):
		return "", "", bad("the key is not valid UTF-8")
	case strings.IndexFunc(key, unicode.IsControl) >= 0:
		return "", "", bad("the key holds a control character")
	}
	if err := CheckBucket(bucket); err != nil {
		return "", "", bad("%v", err)
	}
	for seg := range strings.SplitSeq(key, "/") {
		if seg == "." || seg == ".." {
			return "", "", bad("the key has a %q segment, which servers and proxies that clean paths would resolve to another key or bucket", seg)
		}
	}
	return bucket, key, nil
}

// CheckBucket checks a bucket name: 3 to MaxBucketBytes bytes of ASCII
// letters, digits, dots, hyphens and underscores, starting and ending with
// a letter or digit.
func CheckBucket(b string) error {
	if len(b) < 3 || len(b) > MaxBucketBytes {
		return fmt.Errorf("bucket name %q is %d bytes long; S3 bucket names have 3 to %d", truncate(b), len(b), MaxBucketBytes)
	}
	alnum := func(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' }
	for i := 0; i < len(b); i++ {
		if c := b[i]; !alnum(c) && c != '.' && c != '-' && c != '_' {
			return fmt.Errorf("bucket name %q holds %q; S3 bucket names have letters, digits, '.', '-' and '_'", b, b[i:i+1])
		}
	}
	if !alnum(b[0]) || !alnum(b[len(b)-1]) {
		return fmt.Errorf("bucket name %q must start and end with a letter or digit", b)
	}
	return nil
}

// truncate shortens what an error quotes: an absurdly long path is named
// by its first bytes.
func truncate(s string) string {
	const max = 256
	if len(s) <= max {
		return s
	}
	return s[:max] + "…"
}

// DefaultRegion is the signing region when neither AWS_REGION nor a config
// file names one (S3-compatible servers accept it).
const DefaultRegion = "us-east-1"

// clients holds one client per endpoint override ("" = the environment's):
// loading the shared config files and building a transport per open would
// cost more than the open's request.
var clients sync.Map // endpoint → *clientEntry

type clientEntry struct {
	once sync.Once
	c    *s3.Client
	host string // the server, for its concurrency bound
	err  error
}

// client returns the S3 client for endpoint ("" = from the environment and
// config files). The environment is read once per endpoint per process.
func client(endpoint string) (*s3.Client, string, error) {
	v, _ := clients.LoadOrStore(endpoint, &clientEntry{})
	e := v.(*clientEntry)
	e.once.Do(func() { e.c, e.host, e.err = newClient(endpoint) })
	return e.c, e.host, e.err
}

func newClient(endpoint string) (*s3.Client, string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		// The loader's errors name files and profiles, never secrets.
		return nil, "", fmt.Errorf("loading the AWS configuration: %w", err)
	}
	if cfg.Region == "" {
		cfg.Region = DefaultRegion
	}
	hc := awshttp.NewBuildableClient().WithTransportOptions(func(t *http.Transport) {
		t.MaxIdleConnsPerHost = DefaultServerParallel
	})
	host := ""
	c := s3.NewFromConfig(cfg, func(o *s3.Options) {
		if endpoint != "" {
			o.BaseEndpoint = aws.String(endpoint)
		}
		if o.BaseEndpoint != nil {
			o.UsePathStyle = true // an S3-compatible server: no bucket subdomains
			host = *o.BaseEndpoint
		}
		o.HTTPClient = hc
		o.Retryer = aws.NopRetryer{} // Object retries itself: body reads included
		// Ranged GETs carry no whole-object checksum to validate, and the
		// uploads of tests need no trailer.
		o.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
		o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
	})
	if host == "" {
		host = "aws:" + cfg.Region
	}
	return c, host, nil
}

// servers bounds the requests in flight to one server across objects.
var servers sync.Map // host → chan struct{}

func serverSem(host string) chan struct{} {
	v, _ := servers.LoadOrStore(host, make(chan struct{}, DefaultServerParallel))
	return v.(chan struct{})
}
