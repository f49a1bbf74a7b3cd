package bench

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// clockTick is the unit of /proc/<pid>/stat's CPU times (USER_HZ): 100 on
// every Linux the bench runs on.
const clockTick = 10 * time.Millisecond

// cpuUse is the CPU time the three parts of the step path have spent: the
// server process, this process (the worker, with the load generator's few
// requests), and Postgres (its backends and background processes, as
// pg_stat_activity lists them, and the postmaster).
type cpuUse struct {
	server, self time.Duration
	postgres     map[int]time.Duration // by pid
	serverOK, pg bool
}

// sampleCPU reads the CPU times now; parts it cannot read (a server on
// another machine, no database) are left out.
func sampleCPU(ctx context.Context, serverPID int, commits *commitCounter) cpuUse {
	var u cpuUse
	if serverPID > 0 {
		u.server, u.serverOK = processCPU(serverPID)
	}
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		u.self = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	if pids, err := commits.postgresPIDs(ctx); err == nil && len(pids) > 0 {
		u.postgres, u.pg = map[int]time.Duration{}, true
		for _, pid := range pids {
			// A pid Postgres named a moment ago, unless it has ended and
			// been reused since.
			if comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); err != nil || !strings.HasPrefix(string(comm), "postgres") {
				continue
			}
			if d, ok := processCPU(pid); ok {
				u.postgres[pid] = d
			}
		}
	}
	return u
}

// cpuPerStep is what each part spent between two samples, in ms per step.
// A Postgres process that started since counts whole; one that ended since
// is lost (the pool keeps its connections for the run, so little is).
func cpuPerStep(before, after cpuUse, steps int) (server, worker, postgres *float64) {
	per := func(d time.Duration) *float64 {
		v := float64(d) / float64(time.Millisecond) / float64(steps)
		return &v
	}
	if before.serverOK && after.serverOK {
		server = per(after.server - before.server)
	}
	worker = per(after.self - before.self)
	if before.pg && after.pg {
		var d time.Duration
		for pid, t := range after.postgres {
			d += t - before.postgres[pid]
		}
		postgres = per(d)
	}
	return server, worker, postgres
}

// processCPU reads a process's user and system time from /proc/<pid>/stat.
func processCPU(pid int) (time.Duration, bool) {
	f, ok := statFields(pid)
	if !ok || len(f) < 13 {
		return 0, false
	}
	user, err1 := strconv.ParseInt(f[11], 10, 64)
	sys, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return time.Duration(user+sys) * clockTick, true
}

// parentPID reads a process's parent from /proc/<pid>/stat.
func parentPID(pid int) (int, bool) {
	f, ok := statFields(pid)
	if !ok || len(f) < 2 {
		return 0, false
	}
	ppid, err := strconv.Atoi(f[1])
	return ppid, err == nil
}

// statFields reads /proc/<pid>/stat's fields after the command name.
func statFields(pid int) ([]string, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil, false
	}
	return parseStat(string(b))
}

// parseStat splits a /proc/<pid>/stat line after the command name, which is
// in parentheses and may hold spaces and parentheses of its own: it ends at
// the line's last ')'. The first field returned is the state (field 3).
func parseStat(line string) ([]string, bool) {
	i := strings.LastIndexByte(line, ')')
	if i < 0 {
		return nil, false
	}
	return strings.Fields(line[i+1:]), true
}
