package iceberg

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"sync/atomic"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"

	icebergio "github.com/apache/iceberg-go/io"
	gocloudS3 "github.com/apache/iceberg-go/io/gocloud/s3"
	icebergutils "github.com/apache/iceberg-go/utils"
)

// S3 request counting. Object storage bills per request (PUT, GET, LIST
// and so on), so the process counts every request the Iceberg file IO
// sends, loads, maintenance and queries alike, for the metrics
// (tracelake_iceberg_s3_requests_total) and docs/OPERATIONS.md. iceberg-go
// builds an S3 client per file-IO call from the call's context, taking an
// aws.Config carried there (utils.WithAwsConfig; github.com/apache/iceberg-go
// io/gocloud/s3/s3.go, resolveS3AWSConfig, v0.7.0) over the one it parses
// from the properties. So the s3:// scheme is registered again here: the
// same configuration iceberg-go would parse, with an HTTP client that
// counts, then iceberg-go's own factory (reached through its s3a:// alias,
// the same factory). SDK retries count: each attempt is billed.

// S3Requests counts requests by kind since the process started.
type S3Requests struct{ Put, Get, Head, List, Delete int64 }

var s3Counts struct{ put, get, head, list, del atomic.Int64 }

// S3RequestCounts returns the S3 requests counted so far.
func S3RequestCounts() S3Requests {
	return S3Requests{Put: s3Counts.put.Load(), Get: s3Counts.get.Load(), Head: s3Counts.head.Load(),
		List: s3Counts.list.Load(), Delete: s3Counts.del.Load()}
}

type countingClient struct{ inner aws.HTTPClient }

func (c countingClient) Do(req *http.Request) (*http.Response, error) {
	countS3(req.Method, req.URL.Query())
	return c.inner.Do(req)
}

// countS3 counts one request by the S3 operation its method and query
// name.
func countS3(method string, q url.Values) {
	switch {
	case method == http.MethodGet && (q.Has("list-type") || q.Has("prefix") || q.Has("delimiter")):
		s3Counts.list.Add(1)
	case method == http.MethodGet:
		s3Counts.get.Add(1)
	case method == http.MethodHead:
		s3Counts.head.Add(1)
	case method == http.MethodDelete, method == http.MethodPost && q.Has("delete"):
		s3Counts.del.Add(1)
	default: // PUT, and POST: the steps of a multipart upload
		s3Counts.put.Add(1)
	}
}

func init() {
	icebergio.Unregister("s3")
	icebergio.Register("s3", countingS3)
}

// countingS3 opens an s3:// file IO whose requests are counted.
func countingS3(ctx context.Context, parsed *url.URL, props map[string]string) (icebergio.IO, error) {
	cfg := icebergutils.GetAwsConfig(ctx)
	if cfg == nil {
		parsedCfg, err := gocloudS3.ParseAWSConfig(ctx, props)
		if err != nil {
			return nil, fmt.Errorf("s3 configuration: %w", err)
		}
		cfg = parsedCfg
	}
	counted := *cfg
	inner := counted.HTTPClient
	if inner == nil { // a context's config without one: the SDK's default
		inner = awshttp.NewBuildableClient()
	}
	counted.HTTPClient = countingClient{inner}
	return icebergio.LoadFS(icebergutils.WithAwsConfig(ctx, &counted), props, "s3a://"+parsed.Host+parsed.Path)
}
