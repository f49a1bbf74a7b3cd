package main

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/noetl-go/noetl/shared/client"
)

// TestSchedulesCommand drives `noetl schedules` in-process against a real
// stack: create from a YAML file (flags win) and from flags, list, get,
// trigger (the run completes with the schedule's input), pause, resume,
// backfill, runs and delete, with their exit codes and messages.
func TestSchedulesCommand(t *testing.T) {
	s := startCLIStack(t)
	if code, out, errOut := s.cli("register", s.file("echo.yaml", echoPlaybook)); code != exitOK {
		t.Fatalf("register: %d\n%s%s", code, out, errOut)
	}
	file := s.file("nightly.yaml", `playbook_path: cli/echo
interval_seconds: 3600
input_payload: {greeting: from the schedule}
overlap: buffer_one
`)
	code, out, errOut := s.cli("schedules", "create", "-f", file, "--overlap", "allow")
	m := regexp.MustCompile(`^created schedule (\d+): cli/echo every 1h0m0s, next run `).FindStringSubmatch(out)
	if code != exitOK || m == nil {
		t.Fatalf("create -f: exit %d\n%s%s", code, out, errOut)
	}
	id := m[1]
	code, out, errOut = s.cli("schedules", "create", "--path", "cli/echo", "--cron", "*/5 * * * *", "--timezone", "Asia/Tokyo", "--paused", "--json")
	paused := decode(t, out)
	if code != exitOK || paused["enabled"] != false || paused["next_run_at"] != nil || paused["timezone"] != "Asia/Tokyo" {
		t.Fatalf("create --json --paused: exit %d %v\n%s", code, paused, errOut)
	}
	pausedID := paused["schedule_id"].(string)

	// Mistakes are named: a file's unknown field, the server's field check.
	bad := s.file("bad.yaml", "playbook_path: cli/echo\ninterval: 60\n")
	if code, _, errOut := s.cli("schedules", "create", "-f", bad); code != exitFail || !strings.Contains(errOut, `unknown field "interval"`) {
		t.Errorf("create with an unknown field: exit %d %s", code, errOut)
	}
	if code, _, errOut := s.cli("schedules", "create", "--path", "cli/echo", "--cron", "61 * * * *"); code != exitFail || !strings.Contains(errOut, "422: cron:") {
		t.Errorf("create with a bad cron: exit %d %s", code, errOut)
	}
	if code, _, errOut := s.cli("schedules", "create", "--cron", "* * * * *"); code != exitUsage || !strings.Contains(errOut, "--path") {
		t.Errorf("create without a playbook: exit %d %s", code, errOut)
	}
	if code, _, errOut := s.cli("schedules", "frobnicate"); code != exitUsage || !strings.Contains(errOut, `unknown subcommand "frobnicate"`) {
		t.Errorf("unknown subcommand: exit %d %s", code, errOut)
	}

	code, out, _ = s.cli("schedules", "list")
	if code != exitOK || !regexp.MustCompile(`(?m)^`+id+`\s+cli/echo\s+every 1h0m0s\s+enabled\s`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^`+pausedID+`\s+cli/echo\s+cron "\*/5 \* \* \* \*" \(Asia/Tokyo\)\s+paused\s`).MatchString(out) {
		t.Fatalf("list: exit %d\n%s", code, out)
	}

	code, out, errOut = s.cli("schedules", "trigger", id)
	tm := regexp.MustCompile(`^schedule \d+: started execution (\d+) `).FindStringSubmatch(out)
	if code != exitOK || tm == nil {
		t.Fatalf("trigger: exit %d\n%s%s", code, out, errOut)
	}
	execID, _ := strconv.ParseInt(tm[1], 10, 64)
	view, err := client.New(s.url, "").Wait(s.ctx, execID, 100*time.Millisecond)
	if err != nil || view.Status != "COMPLETED" || view.Context["echoed_greeting"] != "from the schedule" || strconv.FormatInt(int64(view.ScheduleID), 10) != id {
		t.Fatalf("triggered execution: %v %+v", err, view)
	}

	if code, out, _ := s.cli("schedules", "pause", id); code != exitOK || out != "schedule "+id+" paused\n" {
		t.Errorf("pause: exit %d %q", code, out)
	}
	if code, out, _ := s.cli("schedules", "resume", id); code != exitOK || !strings.HasPrefix(out, "schedule "+id+" resumed, next run ") {
		t.Errorf("resume: exit %d %q", code, out)
	}
	to := time.Now().Add(-24 * time.Hour).Truncate(time.Hour)
	code, out, errOut = s.cli("schedules", "backfill", id, "--from", to.Add(-2*time.Hour).Format(time.RFC3339), "--to", to.Format(time.RFC3339))
	if code != exitOK || !strings.Contains(out, "backfilling 3 due times") {
		t.Fatalf("backfill: exit %d\n%s%s", code, out, errOut)
	}
	if code, _, errOut := s.cli("schedules", "backfill", id, "--from", "yesterday", "--to", "today"); code != exitFail || !strings.Contains(errOut, "--from") {
		t.Errorf("backfill with bad times: exit %d %s", code, errOut)
	}
	// The backfill's runs are fired by the stack's loop, in order.
	deadline := time.Now().Add(time.Minute)
	for {
		code, out, _ = s.cli("schedules", "runs", id)
		if strings.Count(out, " backfill ") == 3 || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if code != exitOK || strings.Count(out, " backfill ") != 3 || !regexp.MustCompile(`(?m)^.*started\s+trigger\s+`+tm[1]+`\s+COMPLETED`).MatchString(out) {
		t.Fatalf("runs: exit %d\n%s", code, out)
	}
	if code, out, _ := s.cli("schedules", "get", id); code != exitOK || !strings.Contains(out, "overlap allow") || !strings.Contains(out, `"greeting":"from the schedule"`) {
		t.Errorf("get: exit %d\n%s", code, out)
	}
	for _, x := range []string{id, pausedID} {
		if code, out, _ := s.cli("schedules", "delete", x); code != exitOK || out != "schedule "+x+" deleted\n" {
			t.Errorf("delete %s: exit %d %q", x, code, out)
		}
	}
	if code, _, errOut := s.cli("schedules", "get", id); code != exitFail || !strings.Contains(errOut, "404") {
		t.Errorf("get after delete: exit %d %s", code, errOut)
	}
	if code, out, _ := s.cli("schedules", "list"); code != exitOK || !strings.Contains(out, "no schedules") {
		t.Errorf("list after delete: exit %d\n%s", code, out)
	}
}
