// Package s3test gives tests a real S3-compatible server: the one .ci/run
// starts (versitygw over a temporary directory) and names in
// FAISS_SIDECAR_TEST_S3_ENDPOINT, with credentials in the standard
// AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY. Without it a test skips with
// a message saying how to run it, except in CI (CI set), where it fails.
package s3test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// EnvEndpoint names the test server's endpoint (http://127.0.0.1:PORT).
const EnvEndpoint = "FAISS_SIDECAR_TEST_S3_ENDPOINT"

var (
	once   sync.Once
	client *s3.Client
	setup  error
	seq    atomic.Int64
)

// Endpoint returns the test server's endpoint, skipping the test when none
// is configured (failing it in CI). It points AWS_ENDPOINT_URL at the
// server when that is unset, so code reading the standard variables finds
// it.
func Endpoint(t testing.TB) string {
	t.Helper()
	ep := os.Getenv(EnvEndpoint)
	if ep == "" {
		msg := EnvEndpoint + " is not set: this test needs an S3-compatible server (.ci/run starts versitygw; " +
			"by hand: ROOT_ACCESS_KEY=k ROOT_SECRET_KEY=s versitygw --port 127.0.0.1:7070 posix DIR, then " +
			EnvEndpoint + "=http://127.0.0.1:7070 AWS_ACCESS_KEY_ID=k AWS_SECRET_ACCESS_KEY=s)"
		if os.Getenv("CI") != "" {
			t.Fatal("in CI: " + msg)
		}
		t.Skip(msg)
	}
	once.Do(func() {
		if os.Getenv("AWS_ENDPOINT_URL") == "" {
			os.Setenv("AWS_ENDPOINT_URL", ep)
		}
		if os.Getenv("AWS_EC2_METADATA_DISABLED") == "" {
			os.Setenv("AWS_EC2_METADATA_DISABLED", "true")
		}
		cfg, err := config.LoadDefaultConfig(context.Background(), config.WithRegion("us-east-1"))
		if err != nil {
			setup = err
			return
		}
		client = s3.NewFromConfig(cfg, func(o *s3.Options) {
			o.BaseEndpoint = aws.String(ep)
			o.UsePathStyle = true
			o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
			o.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
		})
	})
	if setup != nil {
		t.Fatalf("s3test: AWS configuration: %v", setup)
	}
	return ep
}

// Bucket creates a fresh bucket for the test and returns its name.
func Bucket(t testing.TB) string {
	t.Helper()
	Endpoint(t)
	name := fmt.Sprintf("t%d-%d-%s", time.Now().UnixNano()%1e9, seq.Add(1), sanitize(t.Name()))
	if len(name) > 63 {
		name = name[:63]
	}
	name = strings.TrimRight(name, "-")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := client.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: &name}); err != nil {
		t.Fatalf("s3test: creating bucket %s: %v", name, err)
	}
	return name
}

func sanitize(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
		} else {
			b.WriteByte('-')
		}
	}
	return b.String()
}

// Put writes data as bucket/key (replacing any object there) and returns
// its s3:// path.
func Put(t testing.TB, bucket, key string, data []byte) string {
	t.Helper()
	Endpoint(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	_, err := client.PutObject(ctx, &s3.PutObjectInput{Bucket: &bucket, Key: &key, Body: bytes.NewReader(data),
		ContentLength: aws.Int64(int64(len(data)))})
	if err != nil {
		t.Fatalf("s3test: putting %s/%s: %v", bucket, key, err)
	}
	return "s3://" + bucket + "/" + key
}

// PutFile uploads the local file path as bucket/key and returns its s3://
// path.
func PutFile(t testing.TB, bucket, key, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return Put(t, bucket, key, data)
}

// Delete removes bucket/key.
func Delete(t testing.TB, bucket, key string) {
	t.Helper()
	Endpoint(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &bucket, Key: &key}); err != nil {
		t.Fatalf("s3test: deleting %s/%s: %v", bucket, key, err)
	}
}
