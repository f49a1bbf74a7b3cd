package awssched_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"
	"github.com/aws/aws-sdk-go-v2/service/scheduler/types"

	"github.com/noetl-go/noetl/shared/awssched"
	"github.com/noetl-go/noetl/shared/config"
	"github.com/noetl-go/noetl/shared/config/mototest"
	"github.com/noetl-go/noetl/shared/controlplane"
	"github.com/noetl-go/noetl/shared/controlplane/cptest"
	"github.com/noetl-go/noetl/shared/dev/devstack/devstacktest"
)

func TestMain(m *testing.M) { devstacktest.Main(m) }

const (
	group  = "noetl-test"
	target = "arn:aws:lambda:eu-west-1:123456789012:function:noetl-test-schedules"
	role   = "arn:aws:iam::123456789012:role/noetl-test-scheduler"
)

// TestEntriesFollowTheSchedulesTable drives the control plane's schedule
// lifecycle with the EventBridge Scheduler sync pointed at moto (through
// aws-sdk-go-v2, as in AWS): a create writes an enabled entry at the first
// fire time that invokes the schedules function with the fire input and
// role; an update re-arms it; a pause disables it; a resume enables it at
// the next due time after now; a delete removes it.
func TestEntriesFollowTheSchedulesTable(t *testing.T) {
	mototest.IsolateSDK(t)
	url := mototest.Start(t)
	ctx := context.Background()
	client := scheduler.NewFromConfig(mototest.Config(url))
	if _, err := client.CreateScheduleGroup(ctx, &scheduler.CreateScheduleGroupInput{Name: aws.String(group)}); err != nil {
		t.Fatal(err)
	}
	cs := cptest.New(t, 1)
	now := time.Date(2030, 1, 15, 9, 59, 30, 0, time.UTC)
	svc, err := controlplane.New(controlplane.Config{Store: cs.Store, Publisher: cs.Publisher, ServerURL: "http://test",
		Clock:     func() time.Time { return now },
		Schedules: awssched.NewSync(client, config.Scheduler{Group: group, TargetARN: target, RoleARN: role})})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Register(ctx, cptest.ThreeSteps); err != nil {
		t.Fatal(err)
	}
	get := func(id int64) *scheduler.GetScheduleOutput {
		t.Helper()
		out, err := client.GetSchedule(ctx, &scheduler.GetScheduleInput{Name: aws.String(awssched.Name(id)), GroupName: aws.String(group)})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	check := func(id int64, state types.ScheduleState, expr string) {
		t.Helper()
		e := get(id)
		if e.State != state || aws.ToString(e.ScheduleExpression) != expr || aws.ToString(e.ScheduleExpressionTimezone) != "UTC" {
			t.Errorf("entry: state %s expression %s tz %s; want %s %s UTC", e.State, aws.ToString(e.ScheduleExpression),
				aws.ToString(e.ScheduleExpressionTimezone), state, expr)
		}
		if e.Target == nil || aws.ToString(e.Target.Arn) != target || aws.ToString(e.Target.RoleArn) != role ||
			aws.ToString(e.Target.Input) != awssched.Input(id) {
			t.Errorf("entry target %+v, want %s with role %s and input %s", e.Target, target, role, awssched.Input(id))
		}
	}
	path, cron := "tests/three", "0 10 * * *"
	sc, err := svc.CreateSchedule(ctx, controlplane.SchedulePatch{PlaybookPath: &path, Cron: &cron, Timezone: aws.String("Europe/Berlin")})
	if err != nil {
		t.Fatal(err)
	}
	id := sc.ScheduleID
	check(id, types.ScheduleStateEnabled, "at(2030-01-16T09:00:00)") // 10:00 in Berlin is 09:00 UTC; today's has passed

	cron = "30 * * * *"
	if _, err := svc.UpdateSchedule(ctx, id, controlplane.SchedulePatch{Cron: &cron}); err != nil {
		t.Fatal(err)
	}
	check(id, types.ScheduleStateEnabled, "at(2030-01-15T10:30:00)")

	off, on := false, true
	if _, err := svc.UpdateSchedule(ctx, id, controlplane.SchedulePatch{Enabled: &off}); err != nil {
		t.Fatal(err)
	}
	check(id, types.ScheduleStateDisabled, "at(2030-01-15T10:30:00)")

	now = now.Add(3 * time.Hour) // paused through three due times
	if _, err := svc.UpdateSchedule(ctx, id, controlplane.SchedulePatch{Enabled: &on}); err != nil {
		t.Fatal(err)
	}
	check(id, types.ScheduleStateEnabled, "at(2030-01-15T13:30:00)")

	// A firing re-arms the entry at the next fire time.
	now = time.Date(2030, 1, 15, 13, 30, 1, 0, time.UTC)
	if r, err := svc.FireSchedules(ctx); err != nil || r.Started != 1 {
		t.Fatalf("fire: %+v, %v", r, err)
	}
	check(id, types.ScheduleStateEnabled, "at(2030-01-15T14:30:00)")

	if err := svc.DeleteSchedule(ctx, id); err != nil {
		t.Fatal(err)
	}
	_, err = client.GetSchedule(ctx, &scheduler.GetScheduleInput{Name: aws.String(awssched.Name(id)), GroupName: aws.String(group)})
	var missing *types.ResourceNotFoundException
	if !errors.As(err, &missing) {
		t.Fatalf("after delete: GetSchedule = %v, want ResourceNotFound", err)
	}
}

func TestExpressionRoundsUp(t *testing.T) {
	for in, want := range map[time.Time]string{
		time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC):                  "at(2030-01-02T03:04:05)",
		time.Date(2030, 1, 2, 3, 4, 5, 1, time.UTC):                  "at(2030-01-02T03:04:06)",
		time.Date(2030, 1, 2, 3, 4, 5, 0, time.FixedZone("x", 3600)): "at(2030-01-02T02:04:05)",
		{}: "at(2099-01-01T00:00:00)",
	} {
		if got := awssched.Expression(in); got != want {
			t.Errorf("Expression(%s) = %s, want %s", in, got, want)
		}
	}
}
