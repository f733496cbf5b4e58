package nodesettings

import (
	"strings"
	"testing"
)

func TestPersistence(t *testing.T) {
	for _, tc := range []struct {
		name       string
		save       string
		appendOnly bool
		fsync      string
		want       []string // the settings judged unsafe, in order
	}{
		{"no persistence", "", false, "everysec", nil},
		{"an AOF synced on every write", "", true, "always", nil},
		{"an AOF off: its fsync policy does not matter", "", false, "no", nil},
		{"RDB snapshots", "3600 1", false, "always", []string{"save"}},
		{"an AOF synced every second", "", true, "everysec", []string{"appendfsync"}},
		{"both", "60 1", true, "no", []string{"save", "appendfsync"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Persistence(tc.save, tc.appendOnly, tc.fsync)
			if len(got) != len(tc.want) {
				t.Fatalf("got %+v, want risks about %v", got, tc.want)
			}
			for i, r := range got {
				if r.Setting != tc.want[i] || r.Fix == "" || !strings.Contains(r.What, "admitted") {
					t.Errorf("risk %d: %+v, want one about %s with what and a fix", i, r, tc.want[i])
				}
			}
		})
	}
}
