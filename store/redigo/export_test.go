package redigo

// SlotMapKnown reports whether s knows which master serves each slot of
// its Cluster (so that its calls share round trips per master).
func SlotMapKnown(s *Store) bool { return s.nodes.Load() != nil }
