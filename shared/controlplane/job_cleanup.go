package controlplane

import (
	"context"

	"github.com/noetl-go/noetl/shared/store"
)

// cleanOutbox is the cleanup job: it deletes published outbox rows older than
// store.OutboxRetention and event requests' Idempotency-Keys older than
// store.RequestRetention, a bounded batch of each per run; once per run (on
// shard 0) also the cluster's credential reads older than
// store.CredentialReadRetention.
func (s *Service) cleanOutbox(ctx context.Context, sh *store.Shard, r *DrainReport) error {
	n, err := store.DeletePublishedOutbox(ctx, sh.Pool(), store.OutboxRetention, 10000)
	if err != nil {
		return err
	}
	r.OutboxDeleted += n
	if _, err := store.DeleteOldRequests(ctx, sh.Pool(), store.RequestRetention, 10000); err != nil {
		return err
	}
	if sh.Index() == 0 {
		if _, err := store.DeleteOldCredentialReads(ctx, s.st.Cluster(), store.CredentialReadRetention, 10000); err != nil {
			return err
		}
	}
	return nil
}
