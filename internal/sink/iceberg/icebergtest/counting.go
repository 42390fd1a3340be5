package icebergtest

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
)

// Requests counts the S3 requests that went through a counting proxy, by
// kind: PUT, GET (an object), HEAD, LIST (a bucket listing), DELETE (one
// object, or a POST ?delete of many).
type Requests struct {
	mu sync.Mutex
	n  map[string]int
}

// Take returns the counts since the last Take and starts again from zero.
func (r *Requests) Take() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := r.n
	r.n = map[string]int{}
	return n
}

func (r *Requests) add(kind string) {
	r.mu.Lock()
	r.n[kind]++
	r.mu.Unlock()
}

// kindOf names an S3 request's kind (path-style addressing: /bucket/key).
func kindOf(req *http.Request) string {
	q := req.URL.Query()
	object := strings.Contains(strings.Trim(req.URL.Path, "/"), "/")
	switch {
	case req.Method == http.MethodGet && (!object || q.Has("list-type") || q.Has("prefix")):
		return "LIST"
	case req.Method == http.MethodPost && q.Has("delete"):
		return "DELETE"
	case req.Method == http.MethodPost:
		return "PUT" // multipart upload steps
	}
	return req.Method
}

// CountRequests puts a counting reverse proxy in front of s3 and returns
// s3 reached through it. The proxy keeps the Host header the client signed.
func CountRequests(t testing.TB, s3 S3) (S3, *Requests) {
	t.Helper()
	target, err := url.Parse(s3.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	reqs := &Requests{n: map[string]int{}}
	proxy := httputil.NewSingleHostReverseProxy(target)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		reqs.add(kindOf(req))
		proxy.ServeHTTP(w, req)
	}))
	t.Cleanup(srv.Close)
	s3.Endpoint = srv.URL
	return s3, reqs
}
