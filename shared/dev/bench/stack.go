package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/noetl-go/noetl/shared/dev/devstack"
	"github.com/noetl-go/noetl/shared/store"
)

// StackOptions configures StartStack.
type StackOptions struct {
	// Exe is the noetl binary that runs `serve`.
	Exe string
	// Shards is the number of shard databases (default 2, as `noetl serve`).
	Shards int
	// ServeArgs are extra flags for `noetl serve` (e.g. --pprof).
	ServeArgs []string
	// ServerLog receives the server's stderr (its JSON log); nil discards it.
	ServerLog io.Writer
	Logger    *slog.Logger
}

// Stack is a control plane the bench started: a durable throwaway Postgres and
// a `noetl serve` process over it (with its embedded NATS).
type Stack struct {
	ServerURL, NATSURL string
	Databases          []string
	PID                int

	pg   *devstack.Postgres
	cmd  *exec.Cmd
	exit chan error
}

// StartStack starts Postgres with fsync, synchronous_commit and
// full_page_writes on (what users run) and `noetl serve` over it.
func StartStack(ctx context.Context, o StackOptions) (_ *Stack, err error) {
	if o.Shards <= 0 {
		o.Shards = 2
	}
	if o.ServerLog == nil {
		o.ServerLog = io.Discard
	}
	s := &Stack{}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	s.pg, err = devstack.StartPostgres(ctx, devstack.PostgresOptions{Shards: o.Shards, Fsync: true,
		SynchronousCommit: true, FullPageWrites: true, Logger: o.Logger})
	if err != nil {
		return nil, fmt.Errorf("start Postgres: %w", err)
	}
	if err := store.Migrate(ctx, store.Config{ClusterDSN: s.pg.ClusterDSN, ShardDSNs: s.pg.ShardDSNs}); err != nil {
		return nil, fmt.Errorf("migrate: %w", err)
	}
	s.Databases = append([]string{s.pg.ClusterDSN}, s.pg.ShardDSNs...)

	args := append([]string{"serve", "--listen", "127.0.0.1:0"}, o.ServeArgs...)
	s.cmd = exec.Command(o.Exe, args...)
	// The step path is measured, not logging: requests are logged at info.
	// The DSNs (with the cluster's password) go in the environment, which
	// other users cannot read, not the command line, which they can.
	s.cmd.Env = append(os.Environ(), "NOETL_LOG_LEVEL=warn",
		"NOETL_DATABASE_URL="+s.pg.ClusterDSN, "NOETL_SHARD_URLS="+strings.Join(s.pg.ShardDSNs, ","))
	s.cmd.Stderr = o.ServerLog
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := s.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s serve: %w", o.Exe, err)
	}
	s.PID = s.cmd.Process.Pid
	s.exit = make(chan error, 1)
	ready := make(chan struct{})
	var once sync.Once
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			line := sc.Text()
			if _, rest, ok := strings.Cut(line, "embedded NATS at "); ok {
				s.NATSURL, _, _ = strings.Cut(rest, " ")
			}
			if _, rest, ok := strings.Cut(line, "listening on "); ok {
				s.ServerURL = strings.TrimSpace(rest)
				once.Do(func() { close(ready) })
			}
		}
		_, _ = io.Copy(io.Discard, out)
	}()
	go func() { s.exit <- s.cmd.Wait() }()
	select {
	case <-ready:
	case err := <-s.exit:
		s.cmd = nil
		return nil, fmt.Errorf("noetl serve exited before listening: %v", err)
	case <-time.After(2 * time.Minute):
		return nil, errors.New("noetl serve did not start listening within 2 minutes")
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if s.NATSURL == "" {
		return nil, errors.New("noetl serve did not say where its NATS is")
	}
	return s, nil
}

// Close stops the server and removes the database.
func (s *Stack) Close() {
	if s.cmd != nil && s.cmd.Process != nil {
		_ = s.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-s.exit:
		case <-time.After(15 * time.Second):
			_ = s.cmd.Process.Kill()
			<-s.exit
		}
		s.cmd = nil
	}
	if s.pg != nil {
		_ = s.pg.Stop()
		s.pg = nil
	}
}
