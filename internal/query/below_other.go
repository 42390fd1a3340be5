//go:build !linux

package query

// lowestPriority does nothing where the priority is not the thread's
// own: the read's waits between batches still give way to the loads.
func lowestPriority() error { return nil }
