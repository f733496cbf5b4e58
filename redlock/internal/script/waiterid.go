package script

import (
	"iter"
	"strconv"
	"strings"
	"time"
)

// WaiterID is the id of a Lock call in a key's line, as the scripts read
// it: 'Client.Nonce', and, for a call that takes hand-offs,
// 'Client.Nonce~Place+TTLms'. A release tells the call on its Client's
// channel (WakeChannel(Client)); release.lua hands the key itself only to
// an id with a TTL, setting the key to the id for that long; acquire.lua
// orders such ids by Place ('-6': handed to a call ahead in line).
// Client and Nonce hold none of '.', '~', '+', '|', ' ' or '!'.
type WaiterID struct {
	Client string // the Client's id
	Nonce  string // fresh for each id
	// Place is when the call began (µs, the caller's clock), the same on
	// every node; with TTL only.
	Place int64
	// TTL is the call's ttl, whole milliseconds; 0: the call takes no
	// hand-off and its id has no place.
	TTL time.Duration
}

// String is the id as the scripts see it.
func (w WaiterID) String() string {
	id := w.Client + "." + w.Nonce
	if w.TTL > 0 {
		id += "~" + strconv.FormatInt(w.Place, 10) + "+" + strconv.FormatInt(w.TTL.Milliseconds(), 10)
	}
	return id
}

// ParseWaiterID reads an id written by String. ok is false for an id with
// no Client part (an older client's) or a malformed place or ttl.
func ParseWaiterID(s string) (w WaiterID, ok bool) {
	client, rest, ok := strings.Cut(s, ".")
	if !ok || client == "" {
		return WaiterID{}, false
	}
	w.Client, w.Nonce = client, rest
	nonce, suffix, has := strings.Cut(rest, "~")
	if !has {
		return w, true
	}
	place, ttl, has := strings.Cut(suffix, "+")
	p, err1 := strconv.ParseInt(place, 10, 64)
	ms, err2 := strconv.ParseInt(ttl, 10, 64)
	if !has || err1 != nil || err2 != nil || ms < 0 {
		return WaiterID{}, false
	}
	w.Nonce, w.Place, w.TTL = nonce, p, time.Duration(ms)*time.Millisecond
	return w, true
}

// Notice is a release's message to the waiters of a key (release.lua).
type Notice struct {
	Key string
	// Names are the waiter ids the release named, space separated, first
	// in line first; "" names nobody: every waiter of Key may try.
	Names string
	// Handed says the release handed Key to the waiter Names holds: the
	// node that sent the notice set Key to that id.
	Handed bool
	// Server, with Handed, is the identity of the server that sent the
	// notice ("" for none, or a release script that does not say): the
	// hand-off counts only from the server its entry was proven to reach
	// (see SameServer).
	Server string
}

// ParseNotice reads a Pub/Sub message: on a key's ReleaseChannel the
// payload is the names; on a Client's WakeChannel it is 'names|key', or
// '!id server|key' for a hand-off. A key may itself hold '|' and spaces
// (waiter ids and server identities hold neither), so the names end at
// the first '|'. ok is false for a payload that is no notice.
func ParseNotice(channel, payload string) (n Notice, ok bool) {
	if key, ok := strings.CutPrefix(channel, channelPrefix); ok {
		return Notice{Key: key, Names: payload}, true
	}
	if rest, ok := strings.CutPrefix(payload, "!"); ok {
		head, key, ok := strings.Cut(rest, "|")
		id, server, _ := strings.Cut(head, " ")
		return Notice{Key: key, Names: id, Handed: true, Server: server}, ok
	}
	names, key, ok := strings.Cut(payload, "|")
	return Notice{Key: key, Names: names}, ok
}

// Named iterates over the ids in a notice's names, first in line first.
func Named(names string) iter.Seq[string] { return strings.SplitSeq(names, " ") }
