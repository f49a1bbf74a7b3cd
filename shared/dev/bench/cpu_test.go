package bench

import (
	"os"
	"testing"
	"time"
)

// TestProcessCPU: a process's CPU time and parent are read from /proc as the
// kernel keeps them.
func TestProcessCPU(t *testing.T) {
	before, ok := processCPU(os.Getpid())
	if !ok {
		t.Fatal("no CPU time for this process")
	}
	// Spin until the kernel has charged at least two ticks more.
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); {
		if now, _ := processCPU(os.Getpid()); now-before >= 2*clockTick {
			break
		}
	}
	if after, _ := processCPU(os.Getpid()); after-before < 2*clockTick {
		t.Errorf("5 s of spinning charged %v", after-before)
	}
	if ppid, ok := parentPID(os.Getpid()); !ok || ppid != os.Getppid() {
		t.Errorf("parent %d %v, want %d", ppid, ok, os.Getppid())
	}
	if _, ok := processCPU(-1); ok {
		t.Error("a process that does not exist has a CPU time")
	}
}

// TestParseStat: the command name may hold ") " (a process names itself
// what it likes); the fields are counted from its last ')'.
func TestParseStat(t *testing.T) {
	f, ok := parseStat("4242 (odd) name) S 17 4242 4242 0 -1 4194304 1 0 0 0 250 31 0 0 20 0 1")
	if !ok || len(f) < 13 || f[0] != "S" || f[1] != "17" || f[11] != "250" || f[12] != "31" {
		t.Fatalf("fields %q %v: want state S, parent 17, utime 250, stime 31", f, ok)
	}
	if _, ok := parseStat("garbage"); ok {
		t.Error("a line without a command name parsed")
	}
}

// TestLoopbackHosts: only a Postgres on this machine has its processes in
// /proc; a remote one's pids would name local processes.
func TestLoopbackHosts(t *testing.T) {
	for host, want := range map[string]bool{"127.0.0.1": true, "::1": true, "localhost": true, "/tmp/pg": true,
		"10.0.0.5": false, "db.example.com": false, "": false} {
		if got := isLoopback(host); got != want {
			t.Errorf("isLoopback(%q) = %v, want %v", host, got, want)
		}
	}
}
