package servers

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// The clock shim is an LD_PRELOAD library that shifts a process's wall
// clock by an offset read from a file (shim/clockshim.c says how). It lives here
// so that the chaos suite's clock jumps and the library's tests of skewed
// node clocks use one and the same shim.
//
//go:embed shim/clockshim.c
var clockShimSource []byte

// BuildClockShim compiles the clock shim with the machine's C compiler (cc,
// else gcc) into dir and returns the library's path.
func BuildClockShim(ctx context.Context, dir string) (string, error) {
	cc, err := exec.LookPath("cc")
	if err != nil {
		if cc, err = exec.LookPath("gcc"); err != nil {
			return "", errors.New("servers: the clock shim needs a C compiler (cc or gcc); install gcc")
		}
	}
	src := filepath.Join(dir, "clockshim.c")
	if err := os.WriteFile(src, clockShimSource, 0o644); err != nil {
		return "", err
	}
	lib := filepath.Join(dir, "clockshim.so")
	out, err := exec.CommandContext(ctx, cc, "-shared", "-fPIC", "-O2", "-o", lib, src).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("servers: compile the clock shim with %s: %w\n%s", cc, err, strings.TrimSpace(string(out)))
	}
	return lib, nil
}

// ClockShimEnv is the environment that runs a process under the shim built
// at lib, its clock offset read from offsetFile.
func ClockShimEnv(lib, offsetFile string) []string {
	return []string{"LD_PRELOAD=" + lib, "QUORUMLOCK_CLOCK_FILE=" + offsetFile}
}

// WriteClockOffset sets the offset in path for processes under the shim.
// The file is replaced atomically: the clock sees either the old or the new
// offset, never half a number.
func WriteClockOffset(path string, d time.Duration) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(strconv.FormatInt(int64(d), 10)+"\n"), 0o644); err != nil {
		return fmt.Errorf("servers: write clock offset: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("servers: write clock offset: %w", err)
	}
	return nil
}
