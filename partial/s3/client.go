package s3

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

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

// ParseURL splits s3://BUCKET/KEY; an empty bucket or key is an error
// wrapping partial.ErrBadOption.
func ParseURL(u string) (bucket, key string, err error) {
	if !IsURL(u) {
		return "", "", fmt.Errorf("%w: %q is not an s3://BUCKET/KEY path", partial.ErrBadOption, u)
	}
	bucket, key, _ = strings.Cut(strings.TrimPrefix(u, Scheme), "/")
	if bucket == "" || key == "" {
		return "", "", fmt.Errorf("%w: %q: an object path is s3://BUCKET/KEY (bucket and key both non-empty)", partial.ErrBadOption, u)
	}
	return bucket, key, nil
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
		return nil, "", fmt.Errorf("s3: loading the AWS configuration: %w", err)
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
