package api

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/noetl-go/noetl/shared/wire"
)

// healthTimeout bounds each dependency check, so a hung database answers 503
// well inside API Gateway's 30 s.
const healthTimeout = 3 * time.Second

// HealthStatus is the health document: {status: ok, database: ok, nats:
// ok|disabled, version}. When a dependency is down the route answers 503 with
// the error shape plus the same fields, the failing one saying "down". The
// cause goes to the log only: the route is open, and connection errors name
// hosts and users.
func (a *API) HealthStatus(ctx context.Context) (int, wire.Health) {
	doc := wire.Health{Version: a.opts.Version}
	var failed []string
	check := func(name string, c Checker) string {
		if c == nil {
			return "disabled"
		}
		cctx, cancel := context.WithTimeout(ctx, healthTimeout)
		defer cancel()
		if err := c(cctx); err != nil {
			a.log.WarnContext(ctx, "health check failed", "dependency", name, "error", err.Error())
			failed = append(failed, name)
			return "down"
		}
		return "ok"
	}
	doc.Database = check("database", a.opts.Database)
	doc.NATS = check("nats", a.opts.NATS)
	if len(failed) > 0 {
		doc.Error = strings.Join(failed, " and ") + " down"
		doc.Status = wire.Value{V: int64(http.StatusServiceUnavailable)}
		return http.StatusServiceUnavailable, doc
	}
	doc.Status = wire.Value{V: "ok"}
	return http.StatusOK, doc
}

// GET /api/health (status function, R-A1; no token needed).
func (a *API) health(ctx context.Context, _ *call) (any, error) {
	status, doc := a.HealthStatus(ctx)
	return a.jsonResponse(status, doc), nil
}

// pingDatabases is the default database check: the cluster and every shard.
func (a *API) pingDatabases(ctx context.Context) error {
	st := a.svc.Store()
	pools := []*pgxpool.Pool{st.Cluster()}
	for i := range st.NumShards() {
		pools = append(pools, st.Shard(i).Pool())
	}
	for i, p := range pools {
		if err := p.Ping(ctx); err != nil {
			if i == 0 {
				return fmt.Errorf("cluster database: %w", err)
			}
			return fmt.Errorf("shard %d: %w", i-1, err)
		}
	}
	return nil
}
