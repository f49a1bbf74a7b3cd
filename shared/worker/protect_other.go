//go:build !linux

package worker

// Only Linux has PR_SET_DUMPABLE; elsewhere the environment scrub is all
// Protect does, and a separate tool user is the protection.
func setNonDumpable() error { return nil }
