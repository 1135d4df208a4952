//go:build !wasip1

package guest

// bind has nothing to connect natively: Run calls the exported reconciler directly.
func bind() {}
