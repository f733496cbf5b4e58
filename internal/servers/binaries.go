package servers

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// ErrBinaryNotFound is wrapped by the errors of starters whose server binary
// is neither on PATH nor in a known install location; test helpers turn it
// into a skip, or a failure in CI.
var ErrBinaryNotFound = errors.New("servers: binary not found")

// FindBinary returns the path of a program a starter runs, or an error
// wrapping ErrBinaryNotFound. "initdb" and "postgres" are also looked for
// where Debian installs them off PATH, and only as a pair from one
// installation. Safe for concurrent use.
func FindBinary(name string) (string, error) {
	switch name {
	case "initdb", "postgres":
		dir, err := postgresBinDir()
		if err != nil {
			return "", err
		}
		return filepath.Join(dir, name), nil
	default:
		return lookBinary(name)
	}
}

// lookBinary finds name on PATH, or checks it when it is a path (it
// contains a slash).
func lookBinary(name string) (string, error) {
	p, err := exec.LookPath(name)
	if err != nil {
		if strings.Contains(name, "/") {
			return "", fmt.Errorf("%w: %s is not an executable file", ErrBinaryNotFound, name)
		}
		return "", fmt.Errorf("%w: %s is not on PATH", ErrBinaryNotFound, name)
	}
	return p, nil
}

// postgresBinDir finds a directory holding both initdb and postgres of one
// installation. PATH wins; otherwise the newest of Debian's versioned
// directories, which its packages keep off PATH.
func postgresBinDir() (string, error) {
	initdb, err1 := exec.LookPath("initdb")
	postgres, err2 := exec.LookPath("postgres")
	if err1 == nil && err2 == nil {
		// Symlinks on PATH may point into different installations; the pair
		// must come from one, or initdb writes a catalog postgres rejects.
		ri, erri := filepath.EvalSymlinks(initdb)
		rp, errp := filepath.EvalSymlinks(postgres)
		if erri == nil && errp == nil && filepath.Dir(ri) == filepath.Dir(rp) {
			return filepath.Dir(rp), nil
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return pgMajor(dirs[i]) > pgMajor(dirs[j]) })
	for _, d := range dirs {
		if isExecutable(filepath.Join(d, "initdb")) && isExecutable(filepath.Join(d, "postgres")) {
			return d, nil
		}
	}
	return "", fmt.Errorf("%w: initdb and postgres are neither on PATH nor in /usr/lib/postgresql/*/bin", ErrBinaryNotFound)
}

func pgMajor(binDir string) float64 {
	v, err := strconv.ParseFloat(filepath.Base(filepath.Dir(binDir)), 64)
	if err != nil {
		return -1
	}
	return v
}

func isExecutable(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Mode().IsRegular() && st.Mode().Perm()&0o111 != 0
}
