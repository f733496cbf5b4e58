package redlock

import (
	"context"
	"math/rand/v2"
	"time"
)

// How a waiting Lock call waits between its attempts: the retry policy's
// delay, a release's wake-up, and the back-off while the lock service
// cannot grant.

// sleep waits before Lock's next attempt: delay, or until a release wakes
// it. A release names the first waiter in the key's line, which tries at
// once (a waiter named second, by an older client's release that names
// two, tries one to two round trips (took) later, in case the first is
// gone). A release that names nobody (no line, or a release by this
// Client) wakes every waiter, and trying all at once would split the nodes
// between them so that nobody wins a majority, so each waits a random part
// of one round trip first.
func (w *waiter) sleep(ctx context.Context, delay time.Duration) error {
	c, wake, took := w.c, w.wake, w.last.took
	t := time.NewTimer(delay)
	defer t.Stop()
	select {
	case pos := <-wake:
		if pos == wakeHanded {
			return nil
		}
		if pos == wakePart {
			// Some nodes handed the key to this call: the others'
			// releases are on their way. Wait for a majority before
			// trying (see handedOff), up to two round trips or one node
			// timeout for the call's ttl, whichever is longer. The
			// notices come over separate connections, and on a busy host
			// their gaps outgrow a round trip; an attempt sent meanwhile
			// costs a round on every node and gains nothing: where the
			// release has not landed yet the key is still held, and
			// where it has, the key waits for this call alone.
			j := time.NewTimer(max(2*took, c.nodeTimeout(w.ttl)))
			defer j.Stop()
			for {
				select {
				case p := <-wake:
					if p == wakePart {
						continue
					}
				case <-j.C:
				case <-ctx.Done():
				case <-c.closing:
				}
				break
			}
			break
		}
		var jitter time.Duration
		switch {
		case took <= 0 || pos == wakeFirst:
		case pos == wakeSecond:
			jitter = took + rand.N(took) // the first has had its round trip
		default:
			jitter = rand.N(took)
		}
		if jitter > 0 {
			j := time.NewTimer(jitter)
			defer j.Stop()
			select {
			case <-j.C:
			case <-ctx.Done():
			case <-c.closing:
			}
		}
	case <-t.C:
	case <-ctx.Done():
	case <-c.closing:
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if c.isClosed() {
		return ErrClosed
	}
	return nil
}

// nextDelay is how long Lock waits after its last attempt failed, given
// the retry policy's delay for it.
func (w *waiter) nextDelay(retry time.Duration) time.Duration {
	delay := retry
	switch {
	case w.last.wait > 0 && onlyQuarantine(w.last.err):
		// The quarantine (or hold-off) was all that stood in the way:
		// nothing a node can grant changes before the first one ends, and
		// the attempt after it admits the node. (A node that was down or
		// unverified may come back sooner: then the call keeps trying.)
		delay = w.last.wait
	case w.last.wait > 0 && w.last.wait < delay:
		delay = w.last.wait
	}
	if b := w.backoff(); b > delay {
		delay = b
		if w.last.wait > 0 {
			// The nodes said when what refused the attempt changes (the
			// first quarantine's end): backing off does not carry the
			// next attempt past that moment.
			delay = min(delay, w.last.wait)
		}
	}
	return delay
}

// backoff is the least Lock waits after its last attempt, however short
// its retry policy: 0, unless the attempt was the second or later in a
// row that the lock service could not grant (IsUnavailable: too few nodes
// answered in time, too few admitted, a round too slow for the ttl). Then
// it is backoffBase doubled per such attempt, up to backoffMax, and drawn
// from its upper half. Contention is not slowed: a waiter is woken by the
// holder's release. But when the nodes cannot answer, every attempt of
// every waiting client is five calls that fail, and a host or network
// already too busy to answer in time got them every 20-100 ms: in the
// chaos nemesis on a loaded machine, ten clients whose rounds all ran out
// of time kept each other's calls late for the whole minute and got 1 to
// 4 leases instead of about 160. Backing off lets the calls answer again,
// at the cost of noticing a recovered service up to backoffMax late. It
// also reports the attempt to noticeUnavailable, which says it once per
// episode.
func (w *waiter) backoff() time.Duration {
	if !IsUnavailable(w.last.err) {
		w.down = 0
		return 0
	}
	w.down++
	w.c.noticeUnavailable(w.last.err)
	if w.down < 2 {
		return 0
	}
	d := min(backoffMax, backoffBase<<min(w.down-2, 8))
	return d/2 + rand.N(d/2)
}

// The backoff of Lock's attempts while the lock service cannot grant.
const (
	backoffBase = 100 * time.Millisecond
	backoffMax  = time.Second
)
