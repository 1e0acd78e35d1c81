// Package rootdirtest holds what the attack tests send as names that
// become paths: one list, so that every place a name reaches is attacked
// with the same variants.
package rootdirtest

import "strings"

// Hostile are names an attacker sends for a field that becomes one path
// element (a claim, a VM, a disk): traversal, absolute paths, NUL and
// control characters, a name of the server's own entries, invalid UTF-8,
// a name longer than a file name may be.
var Hostile = []string{
	"..", "../..", "../../..", "a/../../..", "../../../../../../etc", "/", "/etc/passwd", "/var/lib/backstop",
	"a/b", `..\..`, "a\x00b", "\x00", "pki\x00", ".", ".cbt", ".hidden", "a\nb", "\xff\xfe",
	strings.Repeat("a", 256), strings.Repeat("../", 100),
}

// Lookalikes are names made of Unicode characters that look like dots and
// slashes (one dot leader, fullwidth full stops, a division slash): valid
// names for a path element, but never valid Kubernetes names.
var Lookalikes = []string{"\u2024\u2024", "\uff0e\uff0e", "a\u2215b", "\u2025"}
