package iceberg

// SetBeforeMaintenanceCommit runs f before each maintenance commit.
func (s *Sink) SetBeforeMaintenanceCommit(f func()) { s.beforeMaintenanceCommit = f }
