package goredis

// Queued reports how many script calls wait to share a pipeline.
func Queued(s *Store) int {
	if s.sh == nil {
		return 0
	}
	return s.sh.Queued()
}

// InFlight reports how many round trips of script calls the Store counts
// in flight on a *redis.Client.
func InFlight(s *Store) int {
	if s.sh == nil {
		return 0
	}
	return s.sh.InFlight()
}
