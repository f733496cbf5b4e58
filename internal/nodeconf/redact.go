package nodeconf

import "strings"

// Mask replaces a password where a text would show one.
const Mask = "xxxxx"

// Redact masks the password of one URL: whatever stands between the
// first colon of its user information and the last @ of its authority. A
// URL whose authority has no @ but whose path does may hold a password
// with an unencoded /, ? or #: then the last @ of the URL ends it, so
// that no part of the password shows. A URL without a password is
// returned as it is.
func Redact(u string) string {
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
	return scheme + "://" + user + ":" + Mask + rest[at:]
}
