package suite

import (
	"slices"
	"testing"
	"time"
)

func TestParseRenewSizes(t *testing.T) {
	got, err := ParseRenewSizes("1000, 10000,100000@30s")
	if err != nil {
		t.Fatal(err)
	}
	want := []RenewSize{{1000, RenewTTL}, {10000, RenewTTL}, {100000, 30 * time.Second}}
	if !slices.Equal(got, want) {
		t.Errorf("ParseRenewSizes = %v, want %v", got, want)
	}
	for _, bad := range []string{"", "0", "-5", "ten", "1000@", "1000@fast", "1000@10ms", "1000,"} {
		if _, err := ParseRenewSizes(bad); err == nil {
			t.Errorf("ParseRenewSizes(%q) succeeded", bad)
		}
	}
}
