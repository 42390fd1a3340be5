package main

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tracelake/tracelake/internal/obs"
	"github.com/tracelake/tracelake/internal/sink/iceberg"
)

// reportS3Requests shows the Iceberg file IO's S3 requests
// (iceberg.S3RequestCounts) on the status page and as
// tracelake_iceberg_s3_requests_total{kind}; divided by
// tracelake_staged_bytes_total they are the requests per byte loaded
// (docs/OPERATIONS.md).
func reportS3Requests(m *obs.Metrics, status *obs.Status) {
	status.AddLive("S3 requests", func() string {
		r := iceberg.S3RequestCounts()
		return fmt.Sprintf("PUT %d · GET %d · HEAD %d · LIST %d · DELETE %d", r.Put, r.Get, r.Head, r.List, r.Delete)
	})
	kinds := map[string]func(iceberg.S3Requests) int64{
		"put": func(r iceberg.S3Requests) int64 { return r.Put }, "get": func(r iceberg.S3Requests) int64 { return r.Get },
		"head": func(r iceberg.S3Requests) int64 { return r.Head }, "list": func(r iceberg.S3Requests) int64 { return r.List },
		"delete": func(r iceberg.S3Requests) int64 { return r.Delete },
	}
	for kind, of := range kinds {
		m.Registry.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "tracelake_iceberg_s3_requests_total", Help: "S3 requests of the Iceberg tables' files, by kind (each SDK attempt counts)",
			ConstLabels: prometheus.Labels{"kind": kind},
		}, func() float64 { return float64(of(iceberg.S3RequestCounts())) }))
	}
}
