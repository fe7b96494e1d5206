//go:build !unix

package main

// openFileLimit has no limit to read where there is no RLIMIT_NOFILE.
func openFileLimit() (uint64, bool) { return 0, false }
