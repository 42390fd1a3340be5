package flightsql

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/tracelake/tracelake/internal/tenancy"
)

// Every call, whatever its kind (queries, metadata, refused writes), is
// resolved to a scope before it reaches the handler: a call Tenants
// refuses gets its refusal and nothing else.

type scopeKey struct{}

// resolve is the scope of the call ctx carries, from its own metadata.
func resolve(ctx context.Context, tenants Tenants) (tenancy.Scope, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	sent, err := tenancy.NamedInMetadata(md)
	if err != nil {
		return tenancy.Scope{}, status(err)
	}
	var auth string // the first, as the OTLP receivers take it
	if v := md.Get("authorization"); len(v) > 0 {
		auth = v[0]
	}
	sc, err := tenants.Read(sent, tenancy.Bearer(auth))
	if err != nil {
		return tenancy.Scope{}, status(err)
	}
	return sc, nil
}

// scopeOf is the scope the interceptors resolved for the call.
func scopeOf(ctx context.Context) (tenancy.Scope, bool) {
	sc, ok := ctx.Value(scopeKey{}).(tenancy.Scope)
	return sc, ok
}

func unaryScope(tenants Tenants) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, next grpc.UnaryHandler) (any, error) {
		sc, err := resolve(ctx, tenants)
		if err != nil {
			return nil, err
		}
		return next(context.WithValue(ctx, scopeKey{}, sc), req)
	}
}

func streamScope(tenants Tenants) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, next grpc.StreamHandler) error {
		sc, err := resolve(ss.Context(), tenants)
		if err != nil {
			return err
		}
		return next(srv, &scopedStream{ss, context.WithValue(ss.Context(), scopeKey{}, sc)})
	}
}

// scopedStream is a stream whose context carries its scope.
type scopedStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *scopedStream) Context() context.Context { return s.ctx }
