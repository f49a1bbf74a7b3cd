package tools

import (
	"context"
	"encoding/base64"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/noetl-go/noetl/shared/pipeline"
	"github.com/noetl-go/noetl/shared/toolresult"
)

func py(code string, extra ...any) map[string]any {
	cfg := map[string]any{"kind": "python", "code": code}
	for i := 0; i+1 < len(extra); i += 2 {
		cfg[extra[i].(string)] = extra[i+1]
	}
	return cfg
}

// realPython is the interpreter python3 resolves to (PATH may hold a pyenv shim, a
// script that sets variables of its own and costs a second per start).
var realPython = func() func(t *testing.T) string {
	var once sync.Once
	var path string
	var err error
	return func(t *testing.T) string {
		t.Helper()
		once.Do(func() {
			var out []byte
			out, err = exec.Command("python3", "-c", "import sys; print(sys.executable)").Output()
			path = strings.TrimSpace(string(out))
		})
		if err != nil || path == "" {
			t.Fatalf("python3: %v", err)
		}
		return path
	}
}()

func TestPythonReturnIsWrapped(t *testing.T) {
	r := New(Options{})
	// R-P1: a top-level return wraps the body in a function of (args, input_data).
	env := execTool(t, r, py("x = input_data['a'] + args['b']\nreturn {'sum': x, 'text': '''{{ not rendered }}'''}"), map[string]any{"a": 1, "b": 2})
	mustSucceed(t, env)
	same(t, "data", env.Data, map[string]any{"sum": 3, "text": "{{ not rendered }}"})
	if env.ExitCode == nil || *env.ExitCode != 0 {
		t.Fatalf("exit_code = %v, want 0", env.ExitCode)
	}
	if env.DurationMs <= 0 {
		t.Fatalf("duration_ms = %d", env.DurationMs)
	}

	// A multi-line string literal survives the wrapping unchanged (wrapping is not
	// textual indentation).
	env = execTool(t, r, py("s = '''a\nb'''\nreturn s"), nil)
	mustSucceed(t, env)
	same(t, "literal", env.Data, "a\nb")
}

func TestPythonPrecedence(t *testing.T) {
	t.Parallel()
	r := New(Options{Python: realPython(t)})
	cases := []struct {
		name  string
		code  string
		input map[string]any
		want  any
	}{
		{"return wins over global result", "global result\nresult = 1\nreturn 2", nil, 2},
		{"return None falls back to global result", "global result\nresult = 7\nreturn None", nil, 7},
		{"main wins over result (NoETL)", "result = 3\ndef main():\n    return 4", nil, 4},
		{"main giving None leaves result", "result = 3\ndef main():\n    pass", nil, 3},
		{"main with named args gets only matching inputs", "def main(a, b):\n    return a * 10 + b", map[string]any{"a": 1, "b": 2, "c": 3}, 12},
		{"main with **kw gets every input", "def main(**kw):\n    return sorted(kw)", map[string]any{"a": 1, "x-y": 2}, []any{"a", "x-y"}},
		{"main with a named arg and **kw", "def main(a, **rest):\n    return [a, sorted(rest)]", map[string]any{"a": 1, "b": 2}, []any{1, []any{"b"}}},
		{"main may set result instead of returning", "def main():\n    global result\n    result = 'set'", nil, "set"},
		{"nothing is null", "x = 1", nil, nil},
		{"an input named result does not shadow main", "def main(result):\n    return result * 2", map[string]any{"result": 5}, 10},
		{"an input named result is the last fallback", "x = 1", map[string]any{"result": 5}, 5},
		{"result rebound by the code counts", "result = result + 1", map[string]any{"result": 5}, 6},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			env := execTool(t, r, py(c.code), c.input)
			mustSucceed(t, env)
			same(t, "data", env.Data, c.want)
		})
	}
}

func TestPythonGlobals(t *testing.T) {
	t.Parallel()
	r := New(Options{Python: realPython(t)})
	// R-P3: input keys win over reserved globals (a fixture passes input_data).
	env := execTool(t, r, py("result = {'input_data': input_data, 'args_other': args['other'], 'other': other}"),
		map[string]any{"input_data": map[string]any{"k": "v"}, "other": 1})
	mustSucceed(t, env)
	same(t, "input key wins", env.Data, map[string]any{"input_data": map[string]any{"k": "v"}, "args_other": 1, "other": 1})

	// Non-identifier keys (and keywords) are not globals but stay in input_data.
	env = execTool(t, r, py("g = globals()\nresult = ['a-b' in g, 'class' in g, '1x' in g, ok, input_data['a-b'], input_data['class']]"),
		map[string]any{"a-b": 1, "class": 2, "1x": 3, "ok": 4})
	mustSucceed(t, env)
	same(t, "skipped keys", env.Data, []any{false, false, false, 4, 1, 2})

	// context, execution_id and step come from the Call on ctx.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ctx = WithCall(ctx, Call{ExecutionID: "4242", Step: "load"})
	env = execCtx(ctx, r, py("result = [context, execution_id, step]"), map[string]any{"n": 1})
	mustSucceed(t, env)
	same(t, "context", env.Data, []any{map[string]any{"execution_id": "4242", "step": "load", "input": map[string]any{"n": 1}}, "4242", "load"})

	// ... or from the _execution_id/_step config keys.
	env = execTool(t, r, py("result = context", ConfigExecutionID, int64(99), ConfigStep, "s2"), nil)
	mustSucceed(t, env)
	same(t, "context from config", env.Data, map[string]any{"execution_id": "99", "step": "s2", "input": map[string]any{}})

	// Integers stay exact both ways (R-T10).
	env = execTool(t, r, py("result = {'in': big, 'out': big + 1, 'huge': 2**70}"), map[string]any{"big": int64(9007199254740993)})
	mustSucceed(t, env)
	m := dataMap(t, env)
	if m["in"] != int64(9007199254740993) || m["out"] != int64(9007199254740994) {
		t.Fatalf("big ints: %#v", m)
	}
	if _, ok := m["huge"].(float64); !ok {
		t.Fatalf("2**70 = %#v, want a float64 (beyond int64)", m["huge"])
	}
}

func TestPythonNonJSONValuesAreStringified(t *testing.T) {
	t.Parallel()
	r := New(Options{Python: realPython(t)})
	code := "import datetime, decimal\n" +
		"result = {'d': datetime.date(2024, 1, 2), 'dec': decimal.Decimal('1.10'), 'nan': float('nan'),\n" +
		"          't': (1, 2), 's': {3}, 1: 'int key', None: 'none key', 'f': 1.5, 'b': True}"
	env := execTool(t, r, py(code), nil)
	mustSucceed(t, env)
	same(t, "data", env.Data, map[string]any{
		"d": "2024-01-02", "dec": "1.10", "nan": "nan", "t": []any{1, 2}, "s": "{3}",
		"1": "int key", "null": "none key", "f": 1.5, "b": true,
	})
}

func TestPythonSystemExit(t *testing.T) {
	t.Parallel()
	r := New(Options{Python: realPython(t)})
	env := execTool(t, r, py("import sys\nresult = 1\nsys.exit(0)\nresult = 2"), nil)
	mustSucceed(t, env)
	same(t, "SystemExit(0)", env.Data, 1)

	env = execTool(t, r, py("import sys\nsys.exit()"), nil)
	mustSucceed(t, env)

	env = execTool(t, r, py("def main():\n    raise SystemExit(0)"), nil)
	mustSucceed(t, env)

	env = execTool(t, r, py("import sys\nsys.exit(3)"), nil)
	mustFail(t, env, toolresult.StatusError, toolresult.KindTool, "SystemExit: 3")
}

func TestPythonException(t *testing.T) {
	t.Parallel()
	r := New(Options{Python: realPython(t)})
	env := execTool(t, r, py("print('before')\ndef f():\n    raise ValueError('boom')\nf()"), nil)
	mustFail(t, env, toolresult.StatusError, toolresult.KindTool, "ValueError: boom")
	if env.Error.Message != "ValueError: boom" {
		t.Fatalf("message = %q, want the traceback's last line", env.Error.Message)
	}
	for _, want := range []string{"Traceback (most recent call last)", "raise ValueError('boom')", "in f", "ValueError: boom"} {
		if !strings.Contains(env.Stderr, want) {
			t.Fatalf("stderr lacks %q:\n%s", want, env.Stderr)
		}
	}
	if strings.Contains(env.Stderr, "noetl_harness") {
		t.Fatalf("stderr shows harness frames:\n%s", env.Stderr)
	}
	if !strings.Contains(env.Stdout, "before") {
		t.Fatalf("stdout = %q", env.Stdout)
	}
	if env.ExitCode == nil || *env.ExitCode == 0 {
		t.Fatalf("exit_code = %v, want non-zero", env.ExitCode)
	}

	// A syntax error is reported the same way.
	env = execTool(t, r, py("def broken(:\n    pass"), nil)
	mustFail(t, env, toolresult.StatusError, toolresult.KindTool, "SyntaxError")

	// A process that dies without a result names its exit code.
	env = execTool(t, r, py("import os\nos._exit(3)"), nil)
	mustFail(t, env, toolresult.StatusError, toolresult.KindTool, "exited with code 3")
}

func TestPythonPrintsDoNotCorruptTheResult(t *testing.T) {
	t.Parallel()
	r := New(Options{Python: realPython(t)})
	code := "import sys\n" +
		"print('{\"ok\": false, \"data\": \"fake\"}')\n" +
		"print('__NOETL_RESULT__ {}')\n" +
		"sys.stdout.write('no newline')\n" +
		"print('to stderr', file=sys.stderr)\n" +
		"result = {'real': True}"
	env := execTool(t, r, py(code), nil)
	mustSucceed(t, env)
	same(t, "data", env.Data, map[string]any{"real": true})
	if !strings.Contains(env.Stdout, `{"ok": false, "data": "fake"}`) || !strings.Contains(env.Stdout, "no newline") {
		t.Fatalf("stdout = %q", env.Stdout)
	}
	if !strings.Contains(env.Stderr, "to stderr") {
		t.Fatalf("stderr = %q", env.Stderr)
	}
}

func TestPythonOutputIsBounded(t *testing.T) {
	t.Parallel()
	r := New(Options{Python: realPython(t), MaxOutput: 1000})
	env := execTool(t, r, py("print('x' * 5000)\nresult = 1"), nil)
	mustSucceed(t, env)
	if len(env.Stdout) > 1200 || !strings.Contains(env.Stdout, "output truncated") {
		t.Fatalf("stdout (%d bytes) not bounded: %q", len(env.Stdout), env.Stdout[max(0, len(env.Stdout)-100):])
	}
	same(t, "data", env.Data, 1)
}

func TestPythonLibs(t *testing.T) {
	t.Parallel()
	r := New(Options{Python: realPython(t)})
	env := execTool(t, r, py("result = [j.dumps({'a': 1}), od.__name__, p.basename('/x/y.txt')]",
		"libs", map[string]any{
			"j":  "json",
			"od": map[string]any{"from": "collections", "import": "OrderedDict"},
			"p":  map[string]any{"from": "os", "import": "path"},
		}), nil)
	mustSucceed(t, env)
	same(t, "libs", env.Data, []any{`{"a": 1}`, "OrderedDict", "y.txt"})

	env = execTool(t, r, py("result = 1", "libs", map[string]any{"x": "no_such_module_xyz"}), nil)
	mustFail(t, env, toolresult.StatusError, toolresult.KindTool, "no_such_module_xyz")
	if !strings.Contains(env.Error.Message, "ModuleNotFoundError") {
		t.Fatalf("message = %q", env.Error.Message)
	}

	env = execTool(t, r, py("result = 1", "libs", map[string]any{"x": map[string]any{"from": "collections", "import": "NoSuchThing"}}), nil)
	mustFail(t, env, toolresult.StatusError, toolresult.KindTool, "collections")
}

func TestPythonScript(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "double.py")
	if err := os.WriteFile(path, []byte("def main(n):\n    return {'doubled': n * 2, 'file': __file__}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := New(Options{Python: realPython(t)})
	env := execTool(t, r, map[string]any{"kind": "python", "script": path}, map[string]any{"n": 21})
	mustSucceed(t, env)
	same(t, "script", env.Data, map[string]any{"doubled": 42, "file": path})

	env = execTool(t, r, map[string]any{"kind": "python", "script": filepath.Join(dir, "missing.py")}, nil)
	mustFail(t, env, toolresult.StatusError, toolresult.KindTool, "missing.py")

	env = execTool(t, r, map[string]any{"kind": "python", "script": path, "code": "result = 1"}, nil)
	mustFail(t, env, toolresult.StatusError, toolresult.KindTool, "not both")

	env = execTool(t, r, map[string]any{"kind": "python"}, nil)
	mustFail(t, env, toolresult.StatusError, toolresult.KindTool, "code or script is required")
}

func TestPythonEnvIsolation(t *testing.T) {
	t.Setenv("NOETL_SECRET", "s3cr3t")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "also-secret")
	// The interpreter itself, not a version-manager shim that adds its own variables.
	r := New(Options{Python: realPython(t)})
	env := execTool(t, r, py("import os\nresult = {'secret': os.environ.get('NOETL_SECRET'), 'mine': os.environ.get('MINE'), 'keys': sorted(os.environ)}",
		"env", map[string]any{"MINE": 7}), nil)
	mustSucceed(t, env)
	m := dataMap(t, env)
	if m["secret"] != nil {
		t.Fatalf("NOETL_SECRET leaked into the subprocess: %v", m["secret"])
	}
	if m["mine"] != "7" {
		t.Fatalf("MINE = %v, want \"7\"", m["mine"])
	}
	allowed := map[string]bool{"PATH": true, "HOME": true, "LANG": true, "TMPDIR": true, "MINE": true,
		"LC_CTYPE": true} // python's own C-locale coercion (PEP 538) may add LC_CTYPE
	for _, k := range m["keys"].([]any) {
		if !allowed[k.(string)] {
			t.Fatalf("unexpected variable %v in the subprocess environment: %v", k, m["keys"])
		}
	}
}

// processGone reports whether pid no longer runs (absent or a zombie).
func processGone(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	// state is the field after the ")" that closes the command name
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && s[i+2] == 'Z'
}

func waitGone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !processGone(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("process %d still running after the tool stopped", pid)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestPIDNamespaceProbe: a probe's answer is kept, unless the failure may
// pass (EAGAIN: the system was short of processes), which is probed again.
func TestPIDNamespaceProbe(t *testing.T) {
	answers := []struct {
		again bool
		err   error
	}{{true, syscall.EAGAIN}, {false, nil}, {false, syscall.EPERM}}
	calls := 0
	probe := func() (bool, error) { a := answers[calls]; calls++; return a.again, a.err }
	var p pidNSProbe
	log := slog.New(slog.DiscardHandler)
	for i, want := range []bool{false, true, true} {
		if got := p.get(probe, log); got != want {
			t.Fatalf("run %d: %v, want %v", i, got, want)
		}
	}
	if calls != 2 {
		t.Fatalf("probed %d times, want 2 (again after EAGAIN, then kept)", calls)
	}
	var refused pidNSProbe
	calls = 2
	for range 3 {
		if refused.get(probe, log) {
			t.Fatal("a refused probe gave true")
		}
	}
	if calls != 3 {
		t.Fatalf("probed %d times after a refusal, want once", calls-2)
	}
}

// sleeperTag is an argument no other process has: a test's sleepers carry
// it, so processesWith finds them whatever pid namespace they ran in.
func sleeperTag() string {
	return fmt.Sprintf("noetl-test-sleeper-%d-%d", os.Getpid(), time.Now().UnixNano())
}

// processesWith lists the running processes (zombies aside) whose command
// line has the argument arg.
func processesWith(arg string) []int {
	ents, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err == nil && slices.Contains(strings.Split(string(b), "\x00"), arg) && !processGone(pid) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// waitNoneWith waits for no process to have the argument arg.
func waitNoneWith(t *testing.T, arg string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		pids := processesWith(arg)
		if len(pids) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("processes %v (tagged %s) still run after the tool stopped", pids, arg)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func readPid(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("pid file: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("pid file %q: %v", b, err)
	}
	return pid
}

func TestPythonTimeoutKillsTheProcessGroup(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("needs /proc")
	}
	code := "import subprocess, sys, time\n" +
		"p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)', tag])\n" +
		"print('started', flush=True)\n" + // before the file the test waits for, which may cancel at once
		"open(pid_file + '.tmp', 'w').write(str(p.pid))\n" +
		"import os; os.rename(pid_file + '.tmp', pid_file)\n" +
		"time.sleep(300)\n"
	r := New(Options{Python: realPython(t)})

	t.Run("cancelled", func(t *testing.T) {
		pidFile, tag := filepath.Join(t.TempDir(), "grandchild.pid"), sleeperTag()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		done := make(chan toolresult.Envelope, 1)
		go func() { done <- execCtx(ctx, r, py(code), map[string]any{"pid_file": pidFile, "tag": tag}) }()
		// Stop it once the grandchild runs, so the test does not depend on timing.
		for {
			if _, err := os.Stat(pidFile); err == nil {
				break
			}
			select {
			case env := <-done:
				t.Fatalf("the tool ended before starting its grandchild: %+v %s", env.Error, env.Stderr)
			case <-time.After(20 * time.Millisecond):
			}
		}
		if len(processesWith(tag)) != 1 {
			t.Fatalf("the grandchild is not found by its tag %s", tag)
		}
		cancel()
		var env toolresult.Envelope
		select {
		case env = <-done:
		case <-time.After(60 * time.Second):
			t.Fatal("the tool did not stop when its ctx was cancelled")
		}
		mustFail(t, env, toolresult.StatusTimeout, toolresult.KindTimeout, "cancelled")
		if !strings.Contains(env.Stdout, "started") {
			t.Fatalf("stdout = %q", env.Stdout)
		}
		waitNoneWith(t, tag)
	})

	t.Run("step deadline", func(t *testing.T) {
		pidFile, tag := filepath.Join(t.TempDir(), "grandchild.pid"), sleeperTag()
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		env := execCtx(ctx, r, py(code), map[string]any{"pid_file": pidFile, "tag": tag})
		mustFail(t, env, toolresult.StatusTimeout, toolresult.KindTimeout, "step deadline exceeded")
		readPid(t, pidFile) // it started
		waitNoneWith(t, tag)
	})

	t.Run("tool timeout", func(t *testing.T) {
		pidFile, tag := filepath.Join(t.TempDir(), "grandchild.pid"), sleeperTag()
		env := execTool(t, r, py(code, "timeout", 3), map[string]any{"pid_file": pidFile, "tag": tag})
		mustFail(t, env, toolresult.StatusTimeout, toolresult.KindTimeout, "tool timeout of 3s exceeded")
		readPid(t, pidFile)
		waitNoneWith(t, tag)
	})
}

func TestPythonLeftoverBackgroundProcessIsKilled(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("needs /proc")
	}
	tag := sleeperTag()
	code := "import subprocess, sys\n" +
		"subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)', tag], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n" +
		"result = 'done'"
	r := New(Options{Python: realPython(t)})
	env := execTool(t, r, py(code), map[string]any{"tag": tag})
	mustSucceed(t, env)
	waitNoneWith(t, tag)
}

// TestPythonLeavesNothingBehind: nothing a python step starts outlives it, not
// even a process that left its process group (start_new_session, a double
// fork with setsid): a root worker gives each run a pid namespace of its own
// (withOwnPIDs). A process left behind would run as the tool user beside the
// later steps of every execution on the worker.
func TestPythonLeavesNothingBehind(t *testing.T) {
	u := toolUser(t)
	python := ResolvePython(context.Background(), "python3", u)
	r := New(Options{User: u, Python: python})
	if !r.ownPIDs() {
		t.Fatal("a worker running as root here must be able to make pid namespaces")
	}
	// The scan finds a process by its tag: finding none below means something.
	control := sleeperTag()
	ctl := exec.Command(python, "-c", "import time; time.sleep(300)", control)
	if err := ctl.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ctl.Process.Kill(); _ = ctl.Wait() }()
	for deadline := time.Now().Add(15 * time.Second); len(processesWith(control)) != 1; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the scan does not find the control process tagged %s", control)
		}
	}

	tag := sleeperTag()
	env := execTool(t, r, py(`
import os, subprocess, sys, time
sleeper = [sys.executable, "-c", "import time; time.sleep(300)", tag]
subprocess.Popen(sleeper, start_new_session=True)
pid = os.fork()
if pid == 0:
    os.setsid()
    if os.fork() == 0:
        os.execv(sys.executable, sleeper)
    os._exit(0)
os.waitpid(pid, 0)
def running():
    n = 0
    for p in os.listdir("/proc"):
        try:
            n += p.isdigit() and tag in open("/proc/%s/cmdline" % p, "rb").read().decode(errors="replace").split("\0")
        except OSError:
            pass
    return n
deadline = time.time() + 30
while running() < 2 and time.time() < deadline:
    time.sleep(0.02)
result = {"pid": os.getpid(), "running": running()}
`), map[string]any{"tag": tag})
	mustSucceed(t, env)
	same(t, "the step", env.Data, map[string]any{"pid": int64(1), "running": int64(2)})
	waitNoneWith(t, tag)
}

func TestPythonMissingInterpreter(t *testing.T) {
	t.Parallel()
	r := New(Options{Python: filepath.Join(t.TempDir(), "no-python")})
	env := execTool(t, r, py("result = 1"), nil)
	mustFail(t, env, toolresult.StatusError, toolresult.KindTool, "no-python")
}

func TestPythonWorkDirIsCleanedUp(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	r := New(Options{Python: realPython(t), WorkDir: dir})
	env := execTool(t, r, py("import os\nresult = os.getcwd()"), nil)
	mustSucceed(t, env)
	cwd, _ := env.Data.(string)
	if !strings.HasPrefix(cwd, dir) {
		t.Fatalf("cwd %q is not under WorkDir %q", cwd, dir)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 0 {
		t.Fatalf("work dir not cleaned up: %v", entries)
	}
}

func TestResolvePython(t *testing.T) {
	p := ResolvePython(context.Background(), "python3", nil)
	if !filepath.IsAbs(p) {
		t.Fatalf("ResolvePython = %q, want an absolute path", p)
	}
	if got := ResolvePython(context.Background(), "no-such-python-here", nil); got != "no-such-python-here" {
		t.Fatalf("a missing interpreter must come back unchanged, got %q", got)
	}
}

// TestPythonNoETLForms: what NoETL's python tool gives a step that this one gives
// too: the render context as `context` (and `data` from it), the pre-imported
// modules and helpers, main() filled from input and context (a coroutine main
// awaited), code_b64, and NoETL's script forms.
func TestPythonNoETLForms(t *testing.T) {
	t.Parallel()
	r := New(Options{Python: realPython(t)})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ctx = WithCall(ctx, Call{ExecutionID: "7", Step: "check"})
	run := func(cfg, input, rc map[string]any) toolresult.Envelope {
		t.Helper()
		return r.Exec(ctx, pipeline.Item{Label: "check", Kind: "python", Config: cfg, Input: input, Context: rc})
	}
	rc := map[string]any{"load": map[string]any{"command_0": map[string]any{"rows": []any{1, 2}}}, "data": map[string]any{"k": "from context"}}

	env := run(py("result = {'rows': context.get('load', {}).get('command_0', {}).get('rows'), 'step': context['step'], 'data': data}"), nil, rc)
	mustSucceed(t, env)
	same(t, "context", env.Data, map[string]any{"rows": []any{1, 2}, "step": "check", "data": map[string]any{"k": "from context"}})

	env = run(py("result = [json.dumps([1]), os.sep, isinstance(uuid.uuid4(), uuid.UUID), datetime.date(2024, 1, 2).isoformat(),\n"+
		"  get_val({'a': [{'b': 3}]}, ['a', 0, 'b']), get_val({}, ['x'], 'd'), deep_merge({'a': {'x': 1}}, {'a': {'y': 2}}),\n"+
		"  make_serializable({'t': datetime.date(2024, 1, 2)}), format_iso8601(now_utc()).endswith('+00:00')]"), nil, nil)
	mustSucceed(t, env)
	same(t, "pre-imports", env.Data, []any{"[1]", "/", true, "2024-01-02", 3, "d", map[string]any{"a": map[string]any{"x": 1, "y": 2}},
		map[string]any{"t": "2024-01-02"}, true})

	// main: by name from the input, then context's data, then context; a
	// parameter named context gets it; defaults fill the rest.
	env = run(py("def main(n, k, load, context, missing='dflt'):\n    return [n, k, sorted(load), context['step'], missing]"), map[string]any{"n": 1}, rc)
	mustSucceed(t, env)
	same(t, "main arguments", env.Data, []any{1, "from context", []any{"command_0"}, "check", "dflt"})
	env = run(py("def main(nowhere):\n    return 1"), nil, nil)
	mustFail(t, env, toolresult.StatusError, toolresult.KindTool, "main() needs argument 'nowhere': give it in the step's input")
	env = run(py("async def main(n):\n    return n * 2"), map[string]any{"n": 4}, nil)
	mustSucceed(t, env)
	same(t, "async main", env.Data, 8)

	env = run(map[string]any{"kind": "python", "code_b64": base64.StdEncoding.EncodeToString([]byte("result = n + 1"))}, map[string]any{"n": 1}, nil)
	mustSucceed(t, env)
	same(t, "code_b64", env.Data, 2)

	dir := t.TempDir()
	path := filepath.Join(dir, "s.py")
	if err := os.WriteFile(path, []byte("result = {'from': 'file', 'n': n}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Path != "/scripts/s.py" || req.Header.Get("X-Key") != "k" {
			http.NotFound(w, req)
			return
		}
		_, _ = w.Write([]byte("result = {'from': 'http', 'n': n}\n"))
	}))
	defer srv.Close()
	for _, c := range []struct {
		name   string
		script any
		from   string
	}{
		{"file", map[string]any{"uri": path, "source": map[string]any{"type": "file"}}, "file"},
		{"file by uri", map[string]any{"uri": path}, "file"},
		{"source as a name", map[string]any{"uri": path, "source": "file"}, "file"},
		{"http", map[string]any{"uri": "scripts/s.py", "source": map[string]any{"type": "http", "endpoint": srv.URL, "headers": map[string]any{"X-Key": "k"}}}, "http"},
		{"inline", map[string]any{"uri": "inline", "source": map[string]any{"type": "inline", "code": "result = {'from': 'inline', 'n': n}"}}, "inline"},
	} {
		env = run(map[string]any{"kind": "python", "script": c.script}, map[string]any{"n": 5}, nil)
		mustSucceed(t, env)
		same(t, c.name, env.Data, map[string]any{"from": c.from, "n": 5})
	}
	env = run(map[string]any{"kind": "python", "script": map[string]any{"uri": "scripts/none.py", "source": map[string]any{"type": "http", "endpoint": srv.URL}}}, nil, nil)
	mustFail(t, env, toolresult.StatusError, toolresult.KindTool, "HTTP 404")
	env = run(map[string]any{"kind": "python", "script": map[string]any{"uri": "x", "source": map[string]any{"type": "ftp"}}}, nil, nil)
	mustFail(t, env, toolresult.StatusError, toolresult.KindTool, "expected file, inline, http, s3 or gcs")
	env = run(map[string]any{"kind": "python", "script": map[string]any{"uri": "s3://bucket", "source": "s3"}}, nil, nil)
	mustFail(t, env, toolresult.StatusError, toolresult.KindTool, "expected s3://bucket/key")
	env = run(map[string]any{"kind": "python", "code": "result = 1", "code_b64": "eA=="}, nil, nil)
	mustFail(t, env, toolresult.StatusError, toolresult.KindTool, "not both")
}
