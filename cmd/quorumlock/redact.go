package main

import (
	"regexp"
	"strings"

	"github.com/quorumlock/quorumlock/internal/nodeconf"
)

// What the CLI prints never carries a password. Passwords reach it only
// through node URLs, QUORUMLOCK_PASSWORD and --password-file (there is no
// --password flag), and a text can echo one only where a credential is
// written: in a URL's user information (scheme://user:PASSWORD@host) or in
// a password=... setting (a PostgreSQL keyword DSN, in a command line that
// run stores as the lock's metadata). redact masks it there, in every
// message, log record, status report and stored metadata.
//
// Rejected: replacing every occurrence of the known passwords in a
// message. A short or common password ("e", "redis") garbled every
// message ("rxxxxxdlock", "xxxxx://") and, by what it garbled, told the
// reader which text the password is.

// mask replaces a password in what the CLI prints.
const mask = nodeconf.Mask

// urlToken is a URL in free text: a scheme, then everything up to a space,
// a quote, a comma (which separates --nodes entries) or a closing bracket.
var urlToken = regexp.MustCompile("[A-Za-z][A-Za-z0-9+.-]*://[^\\s\"'`<>,()\\[\\]{}]+")

// passwordSetting is a password=value setting, the value bare or quoted.
// The name may end a longer one: PGPASSWORD=..., --password=...
var passwordSetting = regexp.MustCompile(`(?i)\b(\w*(?:password|passwd)|pass)(\s*=\s*)('(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*"|[^\s'"]+)`)

// redact masks every credential s echoes; the rest of s is left as it was.
func redact(s string) string {
	if strings.Contains(s, "://") {
		s = urlToken.ReplaceAllStringFunc(s, redactURL)
	}
	if strings.Contains(s, "=") {
		s = passwordSetting.ReplaceAllString(s, "${1}${2}"+mask)
	}
	return s
}

// redactURL masks the password of one URL (nodeconf.Redact).
func redactURL(u string) string { return nodeconf.Redact(u) }
