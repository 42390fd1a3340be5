package obs

import (
	"context"
	"log/slog"
	"strings"
)

// KeepErrors wraps a log handler so that every warning and error logged
// through it also lands in the status page's list of last errors. The list
// sees exactly what the log sees, so it holds no secret the log would not.
func KeepErrors(next slog.Handler, s *Status) slog.Handler {
	return &errorKeeper{next: next, status: s}
}

type errorKeeper struct {
	next   slog.Handler
	status *Status
	prefix string // attributes added by With, already formatted
	group  string // open group, as a key prefix
}

func (h *errorKeeper) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelWarn || h.next.Enabled(ctx, l)
}

func (h *errorKeeper) Handle(ctx context.Context, r slog.Record) error {
	if r.Level >= slog.LevelWarn {
		var b strings.Builder
		b.WriteString(r.Message)
		b.WriteString(h.prefix)
		r.Attrs(func(a slog.Attr) bool {
			writeAttr(&b, h.group, a)
			return true
		})
		h.status.keepError(LoggedError{At: r.Time, Level: r.Level.String(), Text: b.String()})
	}
	if !h.next.Enabled(ctx, r.Level) {
		return nil
	}
	return h.next.Handle(ctx, r)
}

func (h *errorKeeper) WithAttrs(attrs []slog.Attr) slog.Handler {
	var b strings.Builder
	b.WriteString(h.prefix)
	for _, a := range attrs {
		writeAttr(&b, h.group, a)
	}
	return &errorKeeper{next: h.next.WithAttrs(attrs), status: h.status, prefix: b.String(), group: h.group}
}

func (h *errorKeeper) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	return &errorKeeper{next: h.next.WithGroup(name), status: h.status, prefix: h.prefix, group: h.group + name + "."}
}

// writeAttr appends " key=value", flattening groups as key.sub=value.
func writeAttr(b *strings.Builder, group string, a slog.Attr) {
	v := a.Value.Resolve()
	if v.Kind() == slog.KindGroup {
		g := group
		if a.Key != "" {
			g += a.Key + "."
		}
		for _, sub := range v.Group() {
			writeAttr(b, g, sub)
		}
		return
	}
	if a.Key == "" {
		return
	}
	b.WriteByte(' ')
	b.WriteString(group)
	b.WriteString(a.Key)
	b.WriteByte('=')
	b.WriteString(v.String())
}
