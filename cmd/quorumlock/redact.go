package main

import (
	"regexp"
	"strings"
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
const mask = "xxxxx"

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

// redactURL masks the password of one URL: whatever stands between the
// first colon of its user information and the last @ of its authority. A
// URL whose authority has no @ but whose path does may hold a password
// with an unencoded /, ? or #: then the last @ of the URL ends it, so
// that no part of the password shows. A URL without a password is
// returned as it is.
func redactURL(u string) string {
	scheme, rest, ok := strings.Cut(u, "://")
	if !ok {
		return u
	}
	authority := rest
	if end := strings.IndexAny(rest, "/?#"); end >= 0 {
		authority = rest[:end]
	}
	at := strings.LastIndex(authority, "@")
	if at < 0 {
		at = strings.LastIndex(rest, "@")
	}
	if at < 0 {
		return u
	}
	user, _, hasPass := strings.Cut(rest[:at], ":")
	if !hasPass {
		return u
	}
	return scheme + "://" + user + ":" + mask + rest[at:]
}
