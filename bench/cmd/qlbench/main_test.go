package main

import (
	"slices"
	"testing"
)

func TestParseLoadAvg(t *testing.T) {
	got, err := parseLoadAvg("2.72 1.71 2.00 3/266 4379\n")
	if err != nil {
		t.Fatal(err)
	}
	if want := []float64{2.72, 1.71, 2}; !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	for _, bad := range []string{"", "1.0 2.0", "1.0 x 3.0 1/2 3"} {
		if l, err := parseLoadAvg(bad); err == nil {
			t.Errorf("parseLoadAvg(%q) = %v, want an error", bad, l)
		}
	}
}
