package controlplane

import (
	"context"

	"github.com/noetl-go/noetl/shared/store"
)

// publishOutbox is the outbox job: it publishes rows the post-commit
// publisher did not (R-A6), backing off a failed row (outboxMaxDelay).
func (s *Service) publishOutbox(ctx context.Context, sh *store.Shard, maxBatch int, r *DrainReport) error {
	if s.cfg.Publisher == nil {
		return nil
	}
	msgs, err := store.ClaimOutbox(ctx, sh.Pool(), maxBatch)
	if err != nil {
		return err
	}
	var done []int64
	for _, m := range msgs {
		err := s.cfg.Publisher.Publish(ctx, m.Subject, m.MsgID, m.Payload)
		s.fair.published(err == nil)
		if err != nil {
			r.PublishFailed++
			if _, merr := store.MarkOutboxFailed(ctx, sh.Pool(), m.OutboxID, err.Error(), outboxMaxDelay); merr != nil {
				return merr
			}
			continue
		}
		done = append(done, m.OutboxID)
	}
	if len(done) > 0 {
		if _, err := store.MarkOutboxPublished(ctx, sh.Pool(), done); err != nil {
			return err
		}
	}
	r.Published += len(done)
	return nil
}

// measureOutbox counts the rows still pending and the age of the oldest (the
// outbox lag), after the run's other jobs.
func (s *Service) measureOutbox(ctx context.Context, sh *store.Shard, r *DrainReport) error {
	pending, err := store.PendingOutboxCount(ctx, sh.Pool())
	if err != nil {
		return err
	}
	r.OutboxPending += pending
	lag, err := store.OutboxLag(ctx, sh.Pool())
	if err != nil {
		return err
	}
	r.OutboxLag = max(r.OutboxLag, lag)
	return nil
}
