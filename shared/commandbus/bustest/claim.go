package bustest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"sync"

	"github.com/noetl-go/noetl/shared/commandbus"
)

// Claimer is a worker's side of the claim coordinator: Next on one
// connection (it blocks until a record is free), Ack and Nack on another,
// as NoETL's Rust worker keeps them. A failed call drops its connection;
// the next call dials again.
type Claimer struct {
	addr   string
	member uint32
	filter string

	mu   sync.Mutex
	next net.Conn
	acks net.Conn
}

// NewClaimer claims records matching filter (commands.<pool>.>) at addr as
// member.
func NewClaimer(addr string, member uint32, filter string) *Claimer {
	return &Claimer{addr: addr, member: member, filter: filter}
}

// Next waits for the next free record; ctx ending closes the connection.
func (c *Claimer) Next(ctx context.Context) (ClaimAnswer, error) {
	c.mu.Lock()
	conn, err := c.dial(ctx, &c.next)
	c.mu.Unlock()
	if err != nil {
		return ClaimAnswer{}, err
	}
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	req, _ := json.Marshal(map[string]any{"Next": map[string]any{"member": c.member, "filter": c.filter}})
	body, err := c.call(conn, req)
	if err == nil {
		var a ClaimAnswer
		if err = json.Unmarshal(body, &a); err == nil {
			return a, nil
		}
	}
	c.mu.Lock()
	c.drop(&c.next, conn)
	c.mu.Unlock()
	return ClaimAnswer{}, err
}

// Ack marks a record done.
func (c *Claimer) Ack(ctx context.Context, key uint64) error { return c.settle(ctx, "Ack", key) }

// Nack gives a record back (the coordinator hands it out again after its
// ack wait).
func (c *Claimer) Nack(ctx context.Context, key uint64) error { return c.settle(ctx, "Nack", key) }

func (c *Claimer) settle(ctx context.Context, op string, key uint64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	conn, err := c.dial(ctx, &c.acks)
	if err != nil {
		return err
	}
	req, _ := json.Marshal(map[string]any{op: map[string]any{"sort_key": key}})
	body, err := c.call(conn, req)
	if err == nil && string(body) != "1" {
		err = fmt.Errorf("bustest: %s answered %q, want 1", op, body)
	}
	if err != nil {
		c.drop(&c.acks, conn)
	}
	return err
}

// Close closes both connections.
func (c *Claimer) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.drop(&c.next, c.next)
	c.drop(&c.acks, c.acks)
}

func (c *Claimer) dial(ctx context.Context, slot *net.Conn) (net.Conn, error) {
	if *slot != nil {
		return *slot, nil
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", c.addr)
	if err != nil {
		return nil, err
	}
	*slot = conn
	return conn, nil
}

func (c *Claimer) drop(slot *net.Conn, conn net.Conn) {
	if conn == nil {
		return
	}
	conn.Close()
	if *slot == conn {
		*slot = nil
	}
}

func (c *Claimer) call(conn net.Conn, req []byte) ([]byte, error) {
	if _, err := conn.Write(commandbus.Frame(req)); err != nil {
		return nil, err
	}
	body, err := commandbus.ReadFrame(conn, commandbus.MaxFrameBytes)
	if errors.Is(err, net.ErrClosed) {
		return nil, fmt.Errorf("bustest: claim connection closed: %w", err)
	}
	return body, err
}
