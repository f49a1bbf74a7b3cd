package controlplane

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/noetl-go/noetl/shared/store"
)

// The internal outbox routes (api.md, R-A6) let an external publisher (NoETL's
// outbox worker, an autoscaler) work the outbox across every shard. Outbox ids
// carry their shard bits (next_id()), so a mark routes by arithmetic.

// OutboxMaxDelay is the default cap of a failed publish's backoff (events.md §2).
const OutboxMaxDelay = outboxMaxDelay

// ClaimOutbox claims up to limit (1..1000) publishable rows over all shards
// for an outside publisher (R-A6's drain claim: FOR UPDATE SKIP LOCKED, rows
// become IN_FLIGHT; attempts + 1 as NoETL counts them at claim). Each
// shard first gets an equal share so a busy shard 0 cannot starve the others;
// what a shard leaves unused goes to the shards that filled their share.
func (s *Service) ClaimOutbox(ctx context.Context, limit int) ([]store.OutboxMessage, error) {
	if limit < 1 || limit > store.OutboxMaxBatch {
		return nil, Errorf(ErrInvalid, "limit: %d is outside 1..%d", limit, store.OutboxMaxBatch)
	}
	n := s.st.NumShards()
	share := (limit + n - 1) / n
	var out []store.OutboxMessage
	full := make([]bool, n)
	for i := range n {
		want := min(share, limit-len(out))
		if want <= 0 {
			break
		}
		rows, err := store.ClaimOutboxForPublisher(ctx, s.st.Shard(i).Pool(), want)
		if err != nil {
			return out, fmt.Errorf("claim outbox on shard %d: %w", i, err)
		}
		out = append(out, rows...)
		full[i] = len(rows) == want
	}
	for i := range n {
		want := limit - len(out)
		if want <= 0 {
			break
		}
		if !full[i] {
			continue
		}
		rows, err := store.ClaimOutboxForPublisher(ctx, s.st.Shard(i).Pool(), want)
		if err != nil {
			return out, fmt.Errorf("claim outbox on shard %d: %w", i, err)
		}
		out = append(out, rows...)
	}
	return out, nil
}

// MarkOutboxPublished marks rows PUBLISHED (only those still PENDING or
// IN_FLIGHT) and returns how many changed. Ids of shards that are not
// configured change nothing.
func (s *Service) MarkOutboxPublished(ctx context.Context, outboxIDs []int64) (int64, error) {
	byShard := map[int][]int64{}
	for _, id := range outboxIDs {
		sh, err := s.st.ShardFor(id)
		if err != nil {
			continue
		}
		byShard[sh.Index()] = append(byShard[sh.Index()], id)
	}
	var total int64
	for i := range s.st.NumShards() {
		ids := byShard[i]
		if len(ids) == 0 {
			continue
		}
		n, err := store.MarkOutboxPublished(ctx, s.st.Shard(i).Pool(), ids)
		if err != nil {
			return total, fmt.Errorf("mark outbox published on shard %d: %w", i, err)
		}
		total += n
	}
	return total, nil
}

// MarkOutboxFailed records an outside publisher's failed publish (NoETL's
// contract): the row goes back to PENDING and backs off
// min(maxDelay, 2^min(8, attempts-1)) seconds, attempts being the caller's
// count or, when 0, the row's (counted at claim); maxDelay <= 0:
// OutboxMaxDelay. It returns the delay. FAILED is never terminal for command
// notifications (R-A6).
func (s *Service) MarkOutboxFailed(ctx context.Context, outboxID int64, publishErr string, attempts int, maxDelay time.Duration) (time.Duration, error) {
	sh, err := s.st.ShardFor(outboxID)
	if err != nil {
		return 0, Errorf(ErrNotFound, "outbox row %d not found", outboxID)
	}
	if maxDelay <= 0 {
		maxDelay = outboxMaxDelay
	}
	d, err := store.MarkOutboxFailedAfter(ctx, sh.Pool(), outboxID, publishErr, attempts, maxDelay)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return 0, Errorf(ErrNotFound, "outbox row %d not found", outboxID)
	case errors.Is(err, store.ErrConflict):
		return 0, Errorf(ErrConflict, "outbox row %d is already published", outboxID)
	case err != nil:
		return 0, err
	}
	return d, nil
}

// OutboxStats is the outbox seen over all shards.
type OutboxStats struct {
	// Pending counts rows not yet published (PENDING, IN_FLIGHT, FAILED).
	Pending int64
	// Lag is the age of the oldest row not yet published; 0 when none.
	Lag time.Duration
}

// OutboxPendingCount counts rows not yet published on every shard: what an
// autoscaler reads.
func (s *Service) OutboxPendingCount(ctx context.Context) (int64, error) {
	var total int64
	err := overShards(ctx, s, store.PendingOutboxCount, func(n int64) { total += n })
	return total, err
}

// OutboxClaimableCount counts, on every shard, the rows a claim would take
// now (NoETL's pending-count: not those in flight or backing off).
func (s *Service) OutboxClaimableCount(ctx context.Context) (int64, error) {
	var total int64
	err := overShards(ctx, s, store.ClaimableOutboxCount, func(n int64) { total += n })
	return total, err
}

// OutboxStats reads the pending count and the lag of every shard.
func (s *Service) OutboxStats(ctx context.Context) (OutboxStats, error) {
	var st OutboxStats
	var err error
	if st.Pending, err = s.OutboxPendingCount(ctx); err != nil {
		return st, err
	}
	err = overShards(ctx, s, store.OutboxLag, func(lag time.Duration) { st.Lag = max(st.Lag, lag) })
	return st, err
}

// CommandCounts counts command rows per status over every shard.
func (s *Service) CommandCounts(ctx context.Context) (map[string]int64, error) {
	total := map[string]int64{}
	err := overShards(ctx, s, store.CountCommandsByStatus, func(counts map[string]int64) {
		for k, n := range counts {
			total[k] += n
		}
	})
	if err != nil {
		return nil, err
	}
	return total, nil
}

// overShards reads every shard in turn and hands each answer to add; the
// first error stops it, naming its shard.
func overShards[T any](ctx context.Context, s *Service, read func(context.Context, store.Querier) (T, error), add func(T)) error {
	for i := range s.st.NumShards() {
		v, err := read(ctx, s.st.Shard(i).Pool())
		if err != nil {
			return fmt.Errorf("shard %d: %w", i, err)
		}
		add(v)
	}
	return nil
}
