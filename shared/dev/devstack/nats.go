package devstack

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// NATSOptions configures an embedded NATS JetStream server.
type NATSOptions struct {
	// Port to listen on (127.0.0.1); 0 picks a free one.
	Port int
	// StoreDir is the JetStream store; "" makes a temp dir that Shutdown removes.
	StoreDir string
	// BaseDir is where the temp store dir is created (default os.TempDir()).
	BaseDir string
	// StartTimeout bounds each start (default 10 s).
	StartTimeout time.Duration
	// Logger receives progress lines; nil discards them.
	Logger *slog.Logger
}

// NATS is an embedded nats-server with JetStream.
type NATS struct {
	opts      NATSOptions
	port      int
	storeDir  string
	ownsStore bool
	log       *slog.Logger

	mu   sync.Mutex
	srv  *server.Server // nil while down
	shut bool           // Shutdown ran: Up refuses

	shutdownOnce sync.Once
	stopAfter    func() bool
}

// StartNATS starts an embedded JetStream server. ctx bounds its life: when it is
// cancelled, Shutdown runs.
func StartNATS(ctx context.Context, opts NATSOptions) (*NATS, error) {
	n := &NATS{opts: opts, port: opts.Port, storeDir: opts.StoreDir, log: opts.Logger}
	if n.log == nil {
		n.log = slog.New(slog.DiscardHandler)
	}
	if n.opts.StartTimeout <= 0 {
		n.opts.StartTimeout = 10 * time.Second
	}
	if n.storeDir == "" {
		base := opts.BaseDir
		if base == "" {
			base = os.TempDir()
		}
		reapStale(base, n.log)
		dir, err := makeOwnedDir(base, natsDirPrefix, nil)
		if err != nil {
			return nil, err
		}
		n.storeDir, n.ownsStore = dir, true
	}
	if err := n.start(); err != nil {
		if n.ownsStore {
			err = errors.Join(err, os.RemoveAll(n.storeDir))
		}
		return nil, err
	}
	n.stopAfter = context.AfterFunc(ctx, n.Shutdown)
	return n, nil
}

func (n *NATS) start() error {
	port := n.port
	if port == 0 {
		port = server.RANDOM_PORT
	}
	srv, err := server.NewServer(&server.Options{
		ServerName: "noetl-devstack",
		Host:       "127.0.0.1",
		Port:       port,
		JetStream:  true,
		StoreDir:   n.storeDir,
		NoSigs:     true, // the owner decides when to stop, not a signal to the process
		NoLog:      true,
	})
	if err != nil {
		return fmt.Errorf("devstack: nats server: %w", err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(n.opts.StartTimeout) {
		srv.Shutdown()
		return fmt.Errorf("devstack: nats server not ready on port %d after %s", n.port, n.opts.StartTimeout)
	}
	if !srv.JetStreamEnabled() {
		srv.Shutdown()
		return errors.New("devstack: nats server started without JetStream")
	}
	n.port = srv.Addr().(*net.TCPAddr).Port
	n.srv = srv
	n.log.Debug("devstack: nats ready", "port", n.port, "store", n.storeDir)
	return nil
}

// URL is the client URL (nats://127.0.0.1:<port>); it stays the same across Down/Up.
func (n *NATS) URL() string { return fmt.Sprintf("nats://127.0.0.1:%d", n.port) }

// Down stops the server but keeps its port and store, so Up brings the same streams
// back: for tests of what happens while NATS is unavailable. Clients see a disconnect.
func (n *NATS) Down() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.srv != nil {
		n.srv.Shutdown()
		n.srv.WaitForShutdown()
		n.srv = nil
	}
}

// Up starts the server again after Down, on the same port and store. It fails if the
// port was taken meanwhile or after Shutdown.
func (n *NATS) Up() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.shut {
		return errors.New("devstack: nats: Up after Shutdown")
	}
	if n.srv != nil {
		return nil
	}
	return n.start()
}

// Restart stops the server and starts it again on the same port with an
// empty store: a restart that loses every stream and the messages in them,
// as a JetStream on memory storage, or a lost volume, does.
func (n *NATS) Restart() error {
	n.Down()
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.shut {
		return errors.New("devstack: nats: Restart after Shutdown")
	}
	entries, err := os.ReadDir(n.storeDir)
	if err != nil {
		return fmt.Errorf("devstack: nats: empty the store: %w", err)
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(n.storeDir, e.Name())); err != nil {
			return fmt.Errorf("devstack: nats: empty the store: %w", err)
		}
	}
	return n.start()
}

// Running reports whether the server is up.
func (n *NATS) Running() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.srv != nil
}

// Shutdown stops the server for good and removes a temp store. Idempotent.
func (n *NATS) Shutdown() {
	n.shutdownOnce.Do(func() {
		if n.stopAfter != nil {
			n.stopAfter()
		}
		n.mu.Lock()
		n.shut = true
		n.mu.Unlock()
		n.Down()
		if n.ownsStore {
			if err := os.RemoveAll(n.storeDir); err != nil {
				n.log.Warn("devstack: remove nats store", "dir", n.storeDir, "err", err)
			}
		}
	})
}
