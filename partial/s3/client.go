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

// URLError is ParseURL's refusal of an object path. Its message is the
// path and why, worded for users, without the kind's name; it matches
// partial.ErrBadOption.
type URLError struct {
	URL    string // the path as given (messages quote its first bytes)
	Reason string
}

func (e *URLError) Error() string { return fmt.Sprintf("%q: %s", truncate(e.URL), e.Reason) }
func (e *URLError) Unwrap() error { return partial.ErrBadOption }

// ParseURL splits s3://BUCKET/KEY. It refuses, with a *URLError that says
// why: an empty bucket or key, a bucket name S3 would not accept
// (CheckBucket), a key longer than MaxKeyBytes, not UTF-8, holding a
// control character, or with a "." or ".." segment (keys are opaque to
// S3, but servers and proxies that clean URL paths would read another
// key, or another bucket).
func ParseURL(u string) (bucket, key string, err error) {
	bad := func(format string, a ...any) error {
		return &URLError{URL: u, Reason: fmt.Sprintf(format, a...)}
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

// Client opens objects (Open, OpenMemory). It holds what every object of
// a program shares: the AWS configuration, read from the environment and
// the shared config files on first use of each endpoint (loading it and
// building a transport per open would cost more than the open's request),
// an HTTP transport per endpoint, the bound on requests in flight per
// server across objects, and the defaults of every Open's Options. A
// program builds one and passes it down to every open (cmd/faiss-sidecar
// at start, from its settings); a test builds its own. Safe for
// concurrent use.
type Client struct {
	defaults Options

	mu        sync.Mutex
	endpoints map[string]*endpoint     // by endpoint override ("": the environment's)
	servers   map[string]chan struct{} // by host: GETs in flight to one server
}

// endpoint is one endpoint's SDK client, made once.
type endpoint struct {
	once sync.Once
	c    *s3.Client
	host string // the server, for its concurrency bound
	err  error
}

// NewClient returns a Client whose opens take defaults' non-zero fields
// (an endpoint, timeouts, …) where their own Options leave a field zero,
// and the package's defaults after that. It reads nothing until an object
// is opened.
func NewClient(defaults Options) *Client {
	return &Client{defaults: defaults, endpoints: map[string]*endpoint{}, servers: map[string]chan struct{}{}}
}

// sdk returns the SDK client for endpoint ("" = from the environment and
// config files), made on first use, and its server's request bound.
func (c *Client) sdk(ep string) (*s3.Client, chan struct{}, error) {
	c.mu.Lock()
	e := c.endpoints[ep]
	if e == nil {
		e = &endpoint{}
		c.endpoints[ep] = e
	}
	c.mu.Unlock()
	e.once.Do(func() { e.c, e.host, e.err = newSDKClient(ep) })
	if e.err != nil {
		return nil, nil, e.err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	sem := c.servers[e.host]
	if sem == nil {
		sem = make(chan struct{}, DefaultServerParallel)
		c.servers[e.host] = sem
	}
	return e.c, sem, nil
}

func newSDKClient(endpoint string) (*s3.Client, string, error) {
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
