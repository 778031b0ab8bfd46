package goredis

// Queued reports how many script calls wait to share a pipeline.
func Queued(s *Store) int {
	if s.sh == nil {
		return 0
	}
	s.sh.mu.Lock()
	defer s.sh.mu.Unlock()
	return len(s.sh.queue)
}

// InFlight reports how many round trips of script calls the Store counts
// in flight on a *redis.Client.
func InFlight(s *Store) int {
	if s.sh == nil {
		return 0
	}
	s.sh.mu.Lock()
	defer s.sh.mu.Unlock()
	return s.sh.busy
}
