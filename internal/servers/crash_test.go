package servers_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/internal/servers"
	"github.com/quorumlock/quorumlock/internal/testenv"
)

// crashHelperEnv makes the test binary start servers, print their
// addresses and SIGKILL itself, as a test binary that crashes would.
const crashHelperEnv = "QUORUMLOCK_TESTENV_CRASH_HELPER"

func crashHelper() {
	dir := os.Getenv(crashHelperEnv)
	ctx := context.Background()
	r, err := servers.StartRedisProcess(ctx, servers.RedisConfig{Dir: filepath.Join(dir, "redis")})
	if err != nil {
		fmt.Println("ERROR", err)
		os.Exit(1)
	}
	fmt.Println("ADDR", r.Addr())
	if os.Getenv("QUORUMLOCK_TESTENV_CRASH_PG") == "1" {
		p, err := servers.StartPostgresProcess(ctx, servers.PostgresConfig{Dir: filepath.Join(dir, "pg")})
		if err != nil {
			fmt.Println("ERROR", err)
			os.Exit(1)
		}
		fmt.Println("ADDR", p.Addr())
	}
	fmt.Println("READY")
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {}
}

func TestServersDieWithTestBinary(t *testing.T) {
	t.Parallel()
	testenv.RequireBinaries(t, "redis-server")
	withPG := !testing.Short()
	if withPG {
		testenv.RequireBinaries(t, "initdb", "postgres")
	}
	// Not t.TempDir: when running as root, PostgreSQL runs as another user,
	// which cannot enter the test's private temporary directories.
	dir, err := os.MkdirTemp("", "quorumlock-crash-")
	require.NoError(t, err)
	require.NoError(t, os.Chmod(dir, 0o755))
	t.Cleanup(func() { _ = os.RemoveAll(dir) })

	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), crashHelperEnv+"="+dir)
	if withPG {
		cmd.Env = append(cmd.Env, "QUORUMLOCK_TESTENV_CRASH_PG=1")
	}
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	var addrs []string
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		line := sc.Text()
		require.False(t, strings.HasPrefix(line, "ERROR"), line)
		if a, ok := strings.CutPrefix(line, "ADDR "); ok {
			addrs = append(addrs, a)
		}
	}
	err = cmd.Wait()
	require.Error(t, err, "the helper must have killed itself")
	require.Equal(t, syscall.SIGKILL, cmd.ProcessState.Sys().(syscall.WaitStatus).Signal())
	want := 1
	if withPG {
		want = 2
	}
	require.Len(t, addrs, want, "the helper must have started every server")

	for _, a := range addrs {
		require.Eventually(t, func() bool {
			c, err := net.DialTimeout("tcp", a, time.Second)
			if err != nil {
				return true
			}
			_ = c.Close()
			return false
		}, 10*time.Second, 20*time.Millisecond, "%s still accepts connections after its parent died", a)
	}
}
