//go:build tools

// Package tools pins redis_exporter for the operations check: go.mod names
// the version, go.sum the hashes every build verifies.
package tools

import _ "github.com/oliver006/redis_exporter"
