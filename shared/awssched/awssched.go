// Package awssched keeps EventBridge Scheduler entries in step with the
// schedules table (docs/schedules.md): one entry per schedule, a one-time
// at() expression set to the schedule's next fire time, invoking the
// schedules function with {"fire_schedules": true}. The control plane
// computes every due time (shared/schedule: the cron grammar, the time
// zone rule, jitter, catch-up, overlap) and re-arms the entry after each
// change and each firing, so EventBridge Scheduler holds no second copy of
// the rules: it is the alarm clock, the table is the truth. The schedules
// function's per-minute sweep fires whatever an entry missed and re-arms it.
package awssched

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"
	"github.com/aws/aws-sdk-go-v2/service/scheduler/types"

	"github.com/noetl-go/noetl/shared/config"
	"github.com/noetl-go/noetl/shared/controlplane"
)

// API is the part of the EventBridge Scheduler client Sync uses.
type API interface {
	CreateSchedule(ctx context.Context, in *scheduler.CreateScheduleInput, opts ...func(*scheduler.Options)) (*scheduler.CreateScheduleOutput, error)
	UpdateSchedule(ctx context.Context, in *scheduler.UpdateScheduleInput, opts ...func(*scheduler.Options)) (*scheduler.UpdateScheduleOutput, error)
	DeleteSchedule(ctx context.Context, in *scheduler.DeleteScheduleInput, opts ...func(*scheduler.Options)) (*scheduler.DeleteScheduleOutput, error)
}

// Sync writes the entries; it implements controlplane.ScheduleSync.
type Sync struct {
	api                 API
	group, target, role string
}

// New makes a Sync from the configuration (NOETL_SCHEDULER_*), or returns
// nil when no scheduler group is configured.
func New(ctx context.Context, cfg *config.Config) (controlplane.ScheduleSync, error) {
	if !cfg.Scheduler.Enabled() {
		return nil, nil
	}
	awsCfg, err := cfg.AWSConfig(ctx)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", config.EnvSchedulerGroup, err)
	}
	return NewSync(scheduler.NewFromConfig(awsCfg), cfg.Scheduler), nil
}

// NewSync writes entries through api.
func NewSync(api API, s config.Scheduler) *Sync {
	return &Sync{api: api, group: s.Group, target: s.TargetARN, role: s.RoleARN}
}

// Name is the entry name of a schedule.
func Name(scheduleID int64) string { return "noetl-schedule-" + strconv.FormatInt(scheduleID, 10) }

// Input is what an entry invokes the schedules function with.
func Input(scheduleID int64) string {
	return `{"fire_schedules": true, "schedule_id": "` + strconv.FormatInt(scheduleID, 10) + `"}`
}

// idleAt is the expression of an entry with nothing to wake for (disabled).
const idleAt = "at(2099-01-01T00:00:00)"

// Expression is the at() expression of a fire time, rounded up to the
// second (at() has no fractions, and early would find nothing due).
func Expression(fireAt time.Time) string {
	if fireAt.IsZero() {
		return idleAt
	}
	t := fireAt.UTC()
	if t.Nanosecond() != 0 {
		t = t.Truncate(time.Second).Add(time.Second)
	}
	return "at(" + t.Format("2006-01-02T15:04:05") + ")"
}

// Put creates or replaces a schedule's entry.
func (s *Sync) Put(ctx context.Context, e controlplane.ScheduleEntry) error {
	state := types.ScheduleStateEnabled
	if !e.Enabled || e.FireAt.IsZero() {
		state = types.ScheduleStateDisabled
	}
	name, expr := Name(e.ScheduleID), Expression(e.FireAt)
	target := &types.Target{Arn: aws.String(s.target), RoleArn: aws.String(s.role), Input: aws.String(Input(e.ScheduleID)),
		RetryPolicy: &types.RetryPolicy{MaximumRetryAttempts: aws.Int32(3), MaximumEventAgeInSeconds: aws.Int32(3600)}}
	window := &types.FlexibleTimeWindow{Mode: types.FlexibleTimeWindowModeOff}
	desc := aws.String("NoETL schedule " + strconv.FormatInt(e.ScheduleID, 10) + ": wakes the schedules function at its next fire time")
	_, err := s.api.UpdateSchedule(ctx, &scheduler.UpdateScheduleInput{Name: aws.String(name), GroupName: aws.String(s.group),
		ScheduleExpression: aws.String(expr), ScheduleExpressionTimezone: aws.String("UTC"), State: state,
		Target: target, FlexibleTimeWindow: window, ActionAfterCompletion: types.ActionAfterCompletionNone, Description: desc})
	var missing *types.ResourceNotFoundException
	if errors.As(err, &missing) {
		_, err = s.api.CreateSchedule(ctx, &scheduler.CreateScheduleInput{Name: aws.String(name), GroupName: aws.String(s.group),
			ScheduleExpression: aws.String(expr), ScheduleExpressionTimezone: aws.String("UTC"), State: state,
			Target: target, FlexibleTimeWindow: window, ActionAfterCompletion: types.ActionAfterCompletionNone, Description: desc})
	}
	if err != nil {
		return fmt.Errorf("EventBridge Scheduler entry %s/%s: %w", s.group, name, err)
	}
	return nil
}

// Delete removes a schedule's entry; one already gone is fine.
func (s *Sync) Delete(ctx context.Context, scheduleID int64) error {
	_, err := s.api.DeleteSchedule(ctx, &scheduler.DeleteScheduleInput{Name: aws.String(Name(scheduleID)), GroupName: aws.String(s.group)})
	var missing *types.ResourceNotFoundException
	if err != nil && !errors.As(err, &missing) {
		return fmt.Errorf("delete EventBridge Scheduler entry %s/%s: %w", s.group, Name(scheduleID), err)
	}
	return nil
}
