package model

import (
	"bytes"
	"crypto/sha256"
	"sort"
	"strconv"
	"strings"
)

type hash [16]byte

// canonical is the identity of s up to a renaming of the nodes: the
// smallest hash over the renamings that sort the nodes by what each holds
// on its own (its clock, its key space, the calls and replies on the wire
// to and from it). Such a signature does not depend on the node's name,
// so the renamings that sort a renamed state are those of s renamed, and
// the smallest hash is the same: sound symmetry reduction, and exact. It
// tries every order of nodes whose signatures tie (all of them in the
// initial state), few once the nodes differ; the nodes are
// interchangeable since every round goes to all of them and they start
// alike, so renamed states have renamed futures. Without Symmetry it is
// the plain hash.
func (m *machine) canonical(s *state) hash {
	enc := s.nodeEncodings()
	n := len(enc)
	id := make([]int, n)
	for i := range id {
		id[i] = i
	}
	if !m.cfg.Symmetry {
		var h hash
		m.enc = s.encode(m.enc, id, id, enc)
		sum := sha256.Sum256(m.enc)
		copy(h[:], sum[:16])
		return h
	}
	sig := make([]string, n)
	for i := 0; i < n; i++ {
		var keys []string
		for k := range s.msgs {
			if s.msgs[k].node == i {
				keys = append(keys, s.msgs[k].key)
			}
		}
		sort.Strings(keys)
		sig[i] = strconv.Itoa(s.ahead[i]) + "|" + string(enc[i]) + "|" + strings.Join(keys, "|")
	}
	order := append([]int(nil), id...)
	sort.SliceStable(order, func(x, y int) bool { return sig[order[x]] < sig[order[y]] })
	// groups of positions whose nodes tie
	var groups [][2]int
	for j := 0; j < n; {
		k := j + 1
		for k < n && sig[order[k]] == sig[order[j]] {
			k++
		}
		groups = append(groups, [2]int{j, k})
		j = k
	}
	var h hash
	first := true
	inv := append([]int(nil), order...) // position -> node
	perm := make([]int, n)              // node -> position
	var try func(g int)
	try = func(g int) {
		if g == len(groups) {
			for j, i := range inv {
				perm[i] = j
			}
			m.enc = s.encode(m.enc, perm, inv, enc)
			sum := sha256.Sum256(m.enc)
			if first || bytes.Compare(sum[:16], h[:]) < 0 {
				copy(h[:], sum[:16])
				first = false
			}
			return
		}
		lo, hi := groups[g][0], groups[g][1]
		if hi-lo == 1 {
			try(g + 1)
			return
		}
		base := append([]int(nil), order[lo:hi]...)
		for _, p := range m.perms[hi-lo] {
			for k, q := range p {
				inv[lo+k] = base[q]
			}
			try(g + 1)
		}
		copy(inv[lo:hi], base)
	}
	try(0)
	return h
}
