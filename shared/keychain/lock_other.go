//go:build !unix

package keychain

import "os"

// lockExclusive: without flock, creation still happens once (createKeyFile
// links the file in only if none exists); concurrent AddKey calls are not
// serialised.
func lockExclusive(*os.File) error { return nil }
