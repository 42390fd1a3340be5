package otlp

import (
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/tracelake/tracelake/internal/tenancy"
)

// The content types of OTLP/HTTP.
const (
	contentProto = "application/x-protobuf"
	contentJSON  = "application/json"
)

// httpHandler serves POST /v1/traces, /v1/logs and /v1/metrics as the
// OTLP/HTTP specification says (opentelemetry-proto docs/specification.md):
// protobuf or JSON bodies, gzip (and zstd) content encodings, the answer in
// the request's encoding, errors as a google.rpc.Status, Retry-After on
// 429 and 503.
func (r *Receivers) httpHandler() http.Handler {
	mux := http.NewServeMux()
	for i := range signals {
		sig := &signals[i]
		mux.HandleFunc(sig.path, func(w http.ResponseWriter, req *http.Request) { r.serveHTTP(w, req, sig) })
	}
	return mux
}

func (r *Receivers) serveHTTP(w http.ResponseWriter, req *http.Request, sig *signal) {
	// Every 4xx carries a google.rpc.Status (the OTLP/HTTP specification,
	// "Failures"): as protobuf where the request's encoding is not known.
	if req.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		r.writeRefusal(w, &refusal{httpStatus: http.StatusMethodNotAllowed, code: codes.Unimplemented, msg: "OTLP/HTTP takes POST"}, false)
		return
	}
	ctype, _, _ := mime.ParseMediaType(req.Header.Get("Content-Type"))
	if ctype != contentProto && ctype != contentJSON {
		r.writeRefusal(w, &refusal{httpStatus: http.StatusUnsupportedMediaType, code: codes.InvalidArgument,
			msg: fmt.Sprintf("Content-Type %q: want %s or %s", ctype, contentProto, contentJSON)}, false)
		return
	}
	isJSON := ctype == contentJSON
	a, ref := r.handleHTTP(req, sig, isJSON)
	r.answered("http", sig.name, ref, a.items, a.rejected)
	if ref != nil {
		r.writeRefusal(w, ref, isJSON)
		return
	}
	out, err := encode(sig.response(a), isJSON)
	if err != nil {
		r.writeRefusal(w, &refusal{httpStatus: http.StatusInternalServerError, code: codes.Internal, msg: err.Error()}, isJSON)
		return
	}
	w.Header().Set("Content-Type", ctype)
	_, _ = w.Write(out)
}

// handleHTTP admits, authenticates, reads and stores one request.
func (r *Receivers) handleHTTP(req *http.Request, sig *signal, isJSON bool) (accepted, *refusal) {
	if ref := r.enter(); ref != nil {
		return accepted{}, ref
	}
	defer r.leave()
	token := tenancy.Bearer(req.Header.Get("Authorization"))
	sent, named := tenancy.NamedInHTTP(req.Header)
	tenant, ref := r.tenant(sent, named, token)
	if ref != nil {
		return accepted{}, ref
	}
	body, ref := r.readBody(req)
	if ref != nil {
		return accepted{}, ref
	}
	return r.accept(req.Context(), sig, tenant, body, isJSON)
}

// readBody reads the request body, decompressed (bodyDecoders), refusing
// it past MaxBodyBytes once decompressed (past compressedBound as sent).
func (r *Receivers) readBody(req *http.Request) ([]byte, *refusal) {
	limit := r.opt.MaxBodyBytes
	enc := strings.ToLower(req.Header.Get("Content-Encoding"))
	decode, ok := bodyDecoders[enc]
	if !ok {
		return nil, &refusal{httpStatus: http.StatusUnsupportedMediaType, code: codes.InvalidArgument, msg: fmt.Sprintf("Content-Encoding %q: want %s", enc, bodyEncodings)}
	}
	src, err := decode(http.MaxBytesReader(nil, req.Body, compressedBound(limit)), limit)
	if err != nil {
		return nil, r.bodyRefusal(err)
	}
	if c, ok := src.(io.Closer); ok {
		defer c.Close()
	}
	body, err := io.ReadAll(io.LimitReader(src, limit+1))
	if err == nil && int64(len(body)) > limit {
		err = errBodyTooLarge
	}
	if err != nil {
		return nil, r.bodyRefusal(err)
	}
	return body, nil
}

// bodyRefusal answers a body that could not be read: too large, too slow
// (otlp.read_timeout) or not of its encoding.
func (r *Receivers) bodyRefusal(err error) *refusal {
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig) || errors.Is(err, errBodyTooLarge):
		return r.tooLarge()
	case errors.Is(err, os.ErrDeadlineExceeded):
		return &refusal{httpStatus: http.StatusRequestTimeout, code: codes.DeadlineExceeded,
			msg: fmt.Sprintf("the request's body did not come within %s (otlp.read_timeout)", r.opt.ReadTimeout)}
	}
	return badBody(err)
}

func badBody(err error) *refusal {
	return &refusal{httpStatus: http.StatusBadRequest, code: codes.InvalidArgument, msg: "cannot read the request body: " + err.Error()}
}

// writeRefusal answers with the refusal as a google.rpc.Status in the
// request's encoding.
func (r *Receivers) writeRefusal(w http.ResponseWriter, ref *refusal, isJSON bool) {
	st := ref.status()
	var out []byte
	if isJSON {
		out, _ = protojson.Marshal(st)
		w.Header().Set("Content-Type", contentJSON)
	} else {
		out, _ = proto.Marshal(st)
		w.Header().Set("Content-Type", contentProto)
	}
	if ref.retry {
		w.Header().Set("Retry-After", retryAfterSeconds(r.opt.RetryAfter))
	}
	w.WriteHeader(ref.httpStatus)
	_, _ = w.Write(out)
}

// retryAfterSeconds is d as Retry-After's delay-seconds (RFC 9110 10.2.3),
// a whole number: rounded up, so a client never comes back before d, and
// at least 1, since 0 asks for the retry at once (a delay under a second
// was sent as 0). gRPC's RetryInfo carries d exactly.
func retryAfterSeconds(d time.Duration) string {
	return strconv.FormatInt(max(1, int64((d+time.Second-1)/time.Second)), 10)
}
