package drift

import (
	"errors"
	"math"
	"testing"
	"time"
)

func TestValidity(t *testing.T) {
	tests := []struct {
		name    string
		ttl     time.Duration
		elapsed time.Duration
		factor  float64
		want    time.Duration
	}{
		// The reference client's worked example: ttl 10 s, elapsed 20 ms.
		{"reference example", 10 * time.Second, 20 * time.Millisecond, 0.01, 9878 * time.Millisecond},
		{"no factor keeps the 2ms", time.Second, 0, 0, 998 * time.Millisecond},
		{"round used everything", 100 * time.Millisecond, 98 * time.Millisecond, 0.01, -time.Millisecond},
		{"negative elapsed buys nothing", time.Second, -time.Hour, 0.01, 988 * time.Millisecond},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Validity(tc.ttl, tc.elapsed, tc.factor); got != tc.want {
				t.Fatalf("Validity(%v, %v, %v) = %v, want %v", tc.ttl, tc.elapsed, tc.factor, got, tc.want)
			}
		})
	}
}

func TestCheckFactor(t *testing.T) {
	for _, f := range []float64{0, 0.01, 0.5, 0.999} {
		if err := CheckFactor(f); err != nil {
			t.Errorf("CheckFactor(%v) = %v, want nil", f, err)
		}
	}
	for _, f := range []float64{-0.01, 1, 2, math.NaN(), math.Inf(1), math.Inf(-1)} {
		if err := CheckFactor(f); !errors.Is(err, ErrFactor) {
			t.Errorf("CheckFactor(%v) = %v, want ErrFactor", f, err)
		}
	}
}

func TestMinTTL(t *testing.T) {
	for _, f := range []float64{0, 0.01, 0.3, 0.9} {
		m := MinTTL(f)
		if Validity(m, 0, f) <= 0 {
			t.Errorf("factor %v: Validity(MinTTL=%v) = %v, want > 0", f, m, Validity(m, 0, f))
		}
		if Validity(m-1, 0, f) > 0 {
			t.Errorf("factor %v: Validity(MinTTL-1) = %v, want <= 0", f, Validity(m-1, 0, f))
		}
	}
}

// FuzzValidity checks the invariants a lock relies on, not fixed values:
// validity never exceeds ttl - 2ms, shrinks as elapsed grows, and a longer
// round never yields a longer lease.
func FuzzValidity(f *testing.F) {
	f.Add(int64(10*time.Second), int64(20*time.Millisecond), int64(5*time.Millisecond), 0.01)
	f.Add(int64(time.Millisecond), int64(0), int64(0), 0.0)
	f.Add(int64(200*time.Millisecond), int64(150*time.Millisecond), int64(time.Second), 0.5)
	f.Fuzz(func(t *testing.T, ttlNs, elapsedNs, moreNs int64, factor float64) {
		if CheckFactor(factor) != nil {
			t.Skip()
		}
		// Keep products inside int64: a year is far beyond any lock TTL.
		const year = int64(365 * 24 * time.Hour)
		if ttlNs <= 0 || ttlNs > year || elapsedNs < 0 || elapsedNs > year || moreNs < 0 || moreNs > year {
			t.Skip()
		}
		ttl, elapsed, more := time.Duration(ttlNs), time.Duration(elapsedNs), time.Duration(moreNs)
		v := Validity(ttl, elapsed, factor)
		if v > ttl-Resolution {
			t.Fatalf("validity %v exceeds ttl-2ms for ttl %v", v, ttl)
		}
		if v > ttl-elapsed {
			t.Fatalf("validity %v exceeds ttl-elapsed %v", v, ttl-elapsed)
		}
		if later := Validity(ttl, elapsed+more, factor); later > v || v-later != more {
			t.Fatalf("elapsed+%v changed validity from %v to %v", more, v, later)
		}
		if d := Drift(ttl, factor); d < Resolution || float64(d-Resolution) < float64(ttl)*factor-1 {
			t.Fatalf("drift %v smaller than ttl*factor+2ms for ttl %v factor %v", d, ttl, factor)
		}
	})
}
