package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/noetl-go/noetl/shared/wire"
)

// ---- schedules ----

func schedulePath(id int64) string { return "/api/schedules/" + strconv.FormatInt(id, 10) }

// CreateSchedule creates a schedule. Not retried: a retry could create two.
func (c *Client) CreateSchedule(ctx context.Context, r wire.ScheduleRequest) (*wire.Schedule, error) {
	return call[wire.Schedule](ctx, c, http.MethodPost, "/api/schedules", r, false)
}

// UpdateSchedule changes the fields r gives (PATCH); Enabled pauses or
// resumes.
func (c *Client) UpdateSchedule(ctx context.Context, id int64, r wire.ScheduleRequest) (*wire.Schedule, error) {
	return call[wire.Schedule](ctx, c, http.MethodPatch, schedulePath(id), r, true)
}

// Schedule returns one schedule.
func (c *Client) Schedule(ctx context.Context, id int64) (*wire.Schedule, error) {
	return call[wire.Schedule](ctx, c, http.MethodGet, schedulePath(id), nil, true)
}

// Schedules returns one page of schedules after cursor ("": the first).
func (c *Client) Schedules(ctx context.Context, cursor string, limit int) (*wire.SchedulePage, error) {
	return call[wire.SchedulePage](ctx, c, http.MethodGet, "/api/schedules"+pageQuery(cursor, limit), nil, true)
}

// DeleteSchedule deletes a schedule.
func (c *Client) DeleteSchedule(ctx context.Context, id int64) error {
	_, err := c.do(ctx, http.MethodDelete, schedulePath(id), nil, true, nil)
	return err
}

// TriggerSchedule runs a schedule now. Not retried: a retry is another run.
func (c *Client) TriggerSchedule(ctx context.Context, id int64) (*wire.Triggered, error) {
	return call[wire.Triggered](ctx, c, http.MethodPost, schedulePath(id)+"/trigger", map[string]any{}, false)
}

// BackfillSchedule runs every due time of [from, to] once, in order.
func (c *Client) BackfillSchedule(ctx context.Context, id int64, from, to time.Time) (*wire.Backfilled, error) {
	body := wire.BackfillRequest{From: wire.At(from), To: wire.At(to)}
	// Retrying is safe: a second backfill of a running one is a 409, and
	// each due time runs once whatever asks for it.
	return call[wire.Backfilled](ctx, c, http.MethodPost, schedulePath(id)+"/backfill", body, true)
}

// ScheduleRuns returns one page of a schedule's log, newest first.
func (c *Client) ScheduleRuns(ctx context.Context, id int64, cursor string, limit int) (*wire.ScheduleRunPage, error) {
	return call[wire.ScheduleRunPage](ctx, c, http.MethodGet, schedulePath(id)+"/runs"+pageQuery(cursor, limit), nil, true)
}

// AllScheduleRuns reads a schedule's whole log, oldest first.
func (c *Client) AllScheduleRuns(ctx context.Context, id int64) ([]wire.ScheduleRun, error) {
	var all []wire.ScheduleRun
	cursor := ""
	for {
		page, err := c.ScheduleRuns(ctx, id, cursor, 1000)
		if err != nil {
			return nil, err
		}
		all = append(all, page.Runs...)
		if page.NextCursor == "" {
			break
		}
		cursor = string(page.NextCursor)
	}
	for i, j := 0, len(all)-1; i < j; i, j = i+1, j-1 {
		all[i], all[j] = all[j], all[i]
	}
	return all, nil
}

func pageQuery(cursor string, limit int) string {
	q := url.Values{}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	return withQuery("", q)
}
