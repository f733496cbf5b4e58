package nodestats

import (
	"context"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/quorumlock/internal/testenv"
)

const sample = `# Commandstats
cmdstat_get:calls=10,usec=77,usec_per_call=7.70,rejected_calls=0,failed_calls=0
cmdstat_evalsha:calls=3,usec=177,usec_per_call=59.00,rejected_calls=0,failed_calls=0
cmdstat_info:calls=2,usec=115,usec_per_call=57.50,rejected_calls=0,failed_calls=0
cmdstat_client|setinfo:calls=4,usec=4,usec_per_call=1.00,rejected_calls=0,failed_calls=0

# CPU
used_cpu_sys:0.250000
used_cpu_user:1.500000
used_cpu_sys_children:0.000000
used_cpu_user_children:0.000000

# Memory
used_memory:1048576
used_memory_human:1.00M
used_memory_rss:7340032
`

func TestParse(t *testing.T) {
	s, err := Parse(strings.ReplaceAll(sample, "\n", "\r\n")) // Redis ends lines with CRLF
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{"get": 10, "evalsha": 3, "info": 2, "client|setinfo": 4}
	for k, v := range want {
		if s.Calls[k] != v {
			t.Errorf("Calls[%q] = %d, want %d", k, s.Calls[k], v)
		}
	}
	if len(s.Calls) != len(want) {
		t.Errorf("Calls = %v, want %v", s.Calls, want)
	}
	if s.CPU != 1.75 {
		t.Errorf("CPU = %v, want 1.75 (user + sys, not the children's)", s.CPU)
	}
	if s.Memory != 1048576 {
		t.Errorf("Memory = %d, want 1048576 (used_memory, not rss)", s.Memory)
	}
	if s.Total() != 17 {
		t.Errorf("Total = %d, want 17 (INFO left out)", s.Total())
	}
}

func TestParseRefusesWhatItCannotRead(t *testing.T) {
	cases := map[string]string{
		"no cpu section":   "cmdstat_get:calls=1,usec=1\n",
		"only user cpu":    "used_cpu_user:1.0\n",
		"bad calls number": "cmdstat_get:calls=x,usec=1\nused_cpu_user:1\nused_cpu_sys:1\n",
		"no calls field":   "cmdstat_get:usec=1\nused_cpu_user:1\nused_cpu_sys:1\n",
		"bad cpu number":   "used_cpu_user:one\nused_cpu_sys:1\n",
		"bad memory":       "used_cpu_user:1\nused_cpu_sys:1\nused_memory:lots\n",
	}
	for name, in := range cases {
		if _, err := Parse(in); err == nil {
			t.Errorf("%s: Parse succeeded", name)
		}
	}
}

func TestSub(t *testing.T) {
	a := Stats{Calls: map[string]int64{"get": 5, "set": 2, "info": 1}, CPU: 1}
	b := Stats{Calls: map[string]int64{"get": 9, "set": 2, "info": 3, "evalsha": 4}, CPU: 1.5}
	d := b.Sub(a)
	if d.Calls["get"] != 4 || d.Calls["evalsha"] != 4 || d.CPU != 0.5 {
		t.Errorf("Sub = %+v", d)
	}
	if _, ok := d.Calls["set"]; ok {
		t.Errorf("Sub kept an unchanged command: %+v", d.Calls)
	}
	if d.Total() != 8 {
		t.Errorf("Total = %d, want 8", d.Total())
	}
}

// TestReadCountsScriptsAndWhatTheyRun checks, on a real node, that the
// difference of two readings shows a script and the commands it ran, and
// leaves out the readings themselves.
func TestReadCountsScriptsAndWhatTheyRun(t *testing.T) {
	c := testenv.Redis(t).Client(t)
	ctx := context.Background()
	before, err := ReadAll(ctx, []*redis.Client{c})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Eval(ctx, "for i = 1, 3 do redis.call('GET', KEYS[1]) end return 1", []string{testenv.Key(t)}).Err(); err != nil {
		t.Fatal(err)
	}
	after, err := ReadAll(ctx, []*redis.Client{c})
	if err != nil {
		t.Fatal(err)
	}
	d := SubAll(after, before)[0]
	if d.Calls["eval"] != 1 || d.Calls["get"] != 3 {
		t.Errorf("calls = %v, want eval 1 and get 3", d.Calls)
	}
	if d.Total() != 4 {
		t.Errorf("Total = %d, want 4 (the script and its 3 GETs; readings left out)", d.Total())
	}
	if d.CPU < 0 {
		t.Errorf("CPU went backwards: %v", d.CPU)
	}
}

// TestReadSeesMemoryGrow checks, on a real node, that a 256 KB value
// shows in the difference of two readings' Memory.
func TestReadSeesMemoryGrow(t *testing.T) {
	c := testenv.Redis(t).Client(t)
	ctx := context.Background()
	before, err := Read(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if before.Memory <= 0 {
		t.Fatalf("Memory = %d, want the node's used_memory", before.Memory)
	}
	if err := c.Set(ctx, testenv.Key(t), strings.Repeat("x", 256<<10), 0).Err(); err != nil {
		t.Fatal(err)
	}
	after, err := Read(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if d := after.Sub(before).Memory; d < 256<<10 {
		t.Errorf("Memory grew by %d bytes, want at least %d", d, 256<<10)
	}
}
