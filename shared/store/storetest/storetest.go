// Package storetest reads commands the way tests need and the product never does:
// an execution's active commands, and a command by its id. Workers learn a command
// from its notification and read it by the event that issued it, so both reads go
// through that reader (store.GetCommandByIssuedEvent) and only the lookup of the
// issuing events is written here.
package storetest

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/noetl-go/noetl/shared/lifecycle"
	"github.com/noetl-go/noetl/shared/store"
)

// Command reads a command by id without locking it; store.ErrNotFound when there
// is none.
func Command(ctx context.Context, q store.Querier, commandID string) (store.Command, error) {
	var issued int64
	err := q.QueryRow(ctx, `SELECT issued_event_id FROM command WHERE command_id = $1`, commandID).Scan(&issued)
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Command{}, fmt.Errorf("storetest: command %s: %w", commandID, store.ErrNotFound)
	}
	if err != nil {
		return store.Command{}, fmt.Errorf("storetest: command %s: %w", commandID, err)
	}
	return store.GetCommandByIssuedEvent(ctx, q, issued)
}

// ActiveCommands returns an execution's PENDING, CLAIMED and RUNNING commands in
// the order they were created.
func ActiveCommands(ctx context.Context, q store.Querier, executionID int64) ([]store.Command, error) {
	rows, err := q.Query(ctx, `
		SELECT issued_event_id FROM command
		WHERE execution_id = $1 AND `+lifecycle.ActiveSQL+`
		ORDER BY created_at, command_id`, executionID)
	if err != nil {
		return nil, fmt.Errorf("storetest: active commands of execution %d: %w", executionID, err)
	}
	issued, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, fmt.Errorf("storetest: active commands of execution %d: %w", executionID, err)
	}
	out := make([]store.Command, 0, len(issued))
	for _, id := range issued {
		c, err := store.GetCommandByIssuedEvent(ctx, q, id)
		if err != nil {
			return nil, fmt.Errorf("storetest: active commands of execution %d: %w", executionID, err)
		}
		out = append(out, c)
	}
	return out, nil
}
