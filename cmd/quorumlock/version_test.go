package main

import (
	"runtime/debug"
	"testing"
)

// TestVersionLineNamesTheReleaseOrTheCommitOnce: a release prints its tag,
// a build of another commit its pseudo-version (which already names the
// commit, so the revision is not repeated), and a build without a version
// the commit it was built from.
func TestVersionLineNamesTheReleaseOrTheCommitOnce(t *testing.T) {
	vcs := []debug.BuildSetting{
		{Key: "vcs", Value: "git"},
		{Key: "vcs.revision", Value: "9262ed456f8d1c2b3a4d5e6f708192a3b4c5d6e7"},
		{Key: "vcs.modified", Value: "true"},
	}
	for _, c := range []struct {
		name     string
		version  string
		settings []debug.BuildSetting
		want     string
	}{
		{"go install at a tag", "v0.1.0", nil, "quorumlock v0.1.0 go1.26.8"},
		{"checkout of a commit after a tag", "v0.1.1-0.20261206040311-9262ed456f8d+dirty", vcs,
			"quorumlock v0.1.1-0.20261206040311-9262ed456f8d+dirty go1.26.8"},
		{"no version recorded, VCS settings", "(devel)", vcs, "quorumlock (devel) 9262ed456f8d+modified go1.26.8"},
		{"no version, no VCS settings", "", nil, "quorumlock (devel) go1.26.8"},
	} {
		bi := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "github.com/quorumlock/quorumlock", Version: c.version}, Settings: c.settings}
		if got := versionLine(bi); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}
