package controlplane

import "time"

// InTransit is inTransit, for the external tests: a command announced this
// long ago waits for a slot.
const InTransit = inTransit

// IdleFor is idleFor: the announcer looks again this often while commands
// are deferred.
const IdleFor = idleFor

// LagClock makes the process's estimate of the database clock for execution
// id lag by d, as on a loaded machine, where the database stamps a row later
// than the txn that wrote it read its clock. False when the cache holds no
// entry for id.
func (s *Service) LagClock(id int64, d time.Duration) bool {
	s.snaps.mu.Lock()
	defer s.snaps.mu.Unlock()
	el := s.snaps.byID[id]
	if el == nil {
		return false
	}
	e := el.Value.(*snapEntry)
	e.local = e.local.Add(d)
	return true
}

// StepsCopied is how many steps the cached state of execution id copied
// from the encoding before it; false when the cache holds no encoding of it.
func (s *Service) StepsCopied(id int64) (int, bool) {
	s.snaps.mu.Lock()
	defer s.snaps.mu.Unlock()
	el := s.snaps.byID[id]
	if el == nil || el.Value.(*snapEntry).enc == nil {
		return 0, false
	}
	return el.Value.(*snapEntry).enc.Copied(), true
}

// Waits says whether this process counts the command that command.issued
// event ev created as waiting in pool (fair dispatch's view).
func (s *Service) Waits(pool string, ev int64) bool {
	s.fair.mu.Lock()
	defer s.fair.mu.Unlock()
	_, ok := s.fair.waiting[pool][ev]
	return ok
}

// BudgetWhatIfChunks sets the bytes of values one what-if chunk read holds
// and a hook that hears how many logs each read handed on, until the test
// ends.
func BudgetWhatIfChunks(t interface{ Cleanup(func()) }, bytes int, read func(logs int)) {
	oldBytes, oldRead := whatIfChunkBytes, whatIfChunkRead
	whatIfChunkBytes, whatIfChunkRead = bytes, read
	t.Cleanup(func() { whatIfChunkBytes, whatIfChunkRead = oldBytes, oldRead })
}
