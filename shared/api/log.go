package api

import (
	"context"
	"log/slog"
	"sync"

	"github.com/noetl-go/noetl/shared/ids"
)

// logAttrs are the ids of the request being served, filled in as the handler
// learns them (the execution id is in the body, the command id in the
// service's answer) and added to every log record made with the request's
// context.
type logAttrs struct {
	mu          sync.Mutex
	requestID   string
	executionID int64
	commandID   string
}

func (l *logAttrs) setExecution(id int64) {
	l.mu.Lock()
	l.executionID = id
	l.mu.Unlock()
}

func (l *logAttrs) setCommand(id string) {
	l.mu.Lock()
	l.commandID = id
	l.mu.Unlock()
}

func (l *logAttrs) attrs() []slog.Attr {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := []slog.Attr{slog.String("request_id", l.requestID)}
	if l.executionID != 0 {
		out = append(out, slog.String("execution_id", ids.Format(l.executionID)))
	}
	if l.commandID != "" {
		out = append(out, slog.String("command_id", l.commandID))
	}
	return out
}

type logAttrsKey struct{}

func withLogAttrs(ctx context.Context, l *logAttrs) context.Context {
	return context.WithValue(ctx, logAttrsKey{}, l)
}

// LogHandler wraps h so that records logged with a request's context carry
// request_id, execution_id and command_id (the service logs with the context
// it is given, so its lines are tied to the request too).
func LogHandler(h slog.Handler) slog.Handler { return ctxHandler{h} }

type ctxHandler struct{ slog.Handler }

func (h ctxHandler) Handle(ctx context.Context, r slog.Record) error {
	if l, ok := ctx.Value(logAttrsKey{}).(*logAttrs); ok {
		r = r.Clone()
		have := map[string]bool{}
		r.Attrs(func(a slog.Attr) bool { have[a.Key] = true; return true })
		for _, a := range l.attrs() {
			if !have[a.Key] {
				r.AddAttrs(a)
			}
		}
	}
	return h.Handler.Handle(ctx, r)
}

func (h ctxHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return ctxHandler{h.Handler.WithAttrs(as)}
}

func (h ctxHandler) WithGroup(name string) slog.Handler {
	return ctxHandler{h.Handler.WithGroup(name)}
}
