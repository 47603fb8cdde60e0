package projections

// SetAuditChunkItems makes audit chunks hold n items until the test ends:
// small chunks seal within the few events a test folds.
func SetAuditChunkItems(t interface{ Cleanup(func()) }, n int) {
	old := auditChunkItems
	auditChunkItems = n
	t.Cleanup(func() { auditChunkItems = old })
}
