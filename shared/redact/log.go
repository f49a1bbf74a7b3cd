package redact

import (
	"context"
	"fmt"
	"log/slog"
)

// LogHandler wraps h so that no record carries a secret: the message and
// every string attribute go through the Masker of secrets (read at each
// record, so secrets learnt later are masked too), attributes under a
// secret-named key are replaced by Mask, and errors are logged as their
// masked text.
func LogHandler(h slog.Handler, secrets *Secrets) slog.Handler {
	return logHandler{h: h, secrets: secrets}
}

type logHandler struct {
	h       slog.Handler
	secrets *Secrets
}

func (l logHandler) Enabled(ctx context.Context, level slog.Level) bool {
	return l.h.Enabled(ctx, level)
}

func (l logHandler) Handle(ctx context.Context, r slog.Record) error {
	m := l.secrets.Masker()
	out := slog.NewRecord(r.Time, r.Level, m.String(r.Message), r.PC)
	r.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(maskAttr(m, a))
		return true
	})
	return l.h.Handle(ctx, out)
}

func (l logHandler) WithAttrs(as []slog.Attr) slog.Handler {
	m := l.secrets.Masker()
	masked := make([]slog.Attr, len(as))
	for i, a := range as {
		masked[i] = maskAttr(m, a)
	}
	return logHandler{h: l.h.WithAttrs(masked), secrets: l.secrets}
}

func (l logHandler) WithGroup(name string) slog.Handler {
	return logHandler{h: l.h.WithGroup(name), secrets: l.secrets}
}

func maskAttr(m *Masker, a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	if SecretKey(a.Key) && v.Kind() != slog.KindGroup {
		return slog.String(a.Key, Mask)
	}
	switch v.Kind() {
	case slog.KindString:
		return slog.String(a.Key, m.String(v.String()))
	case slog.KindGroup:
		g := v.Group()
		out := make([]slog.Attr, len(g))
		for i, e := range g {
			out[i] = maskAttr(m, e)
		}
		return slog.Attr{Key: a.Key, Value: slog.GroupValue(out...)}
	case slog.KindAny:
		switch x := v.Any().(type) {
		case error:
			return slog.String(a.Key, m.String(x.Error()))
		case string, map[string]any, []any:
			return slog.Any(a.Key, m.Redact(x))
		default:
			// Anything else is logged as the handler formats it; if that text
			// holds a secret, the masked text is logged instead.
			if s := fmt.Sprint(x); m.String(s) != s {
				return slog.String(a.Key, m.String(s))
			}
		}
	}
	return slog.Attr{Key: a.Key, Value: v}
}
