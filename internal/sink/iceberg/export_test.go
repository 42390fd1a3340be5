package iceberg

// SetBeforeMaintenanceCommit runs f before each maintenance commit.
func (s *Sink) SetBeforeMaintenanceCommit(f func()) { s.beforeMaintenanceCommit = f }

// SetBeforeLoadCommit runs f in each load between writing its data files
// and committing them.
func (s *Sink) SetBeforeLoadCommit(f func()) { s.beforeLoadCommit = f }
