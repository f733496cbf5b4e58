package servers

import (
	"errors"
	"slices"
	"testing"
)

func TestOrphanIDs(t *testing.T) {
	// Process 10 still runs with start time 500; 11 ran, but its pid now
	// belongs to a process that started later; 12 is gone.
	startOf := func(pid int) string {
		switch pid {
		case 10:
			return "500"
		case 11:
			return "900"
		default:
			return ""
		}
	}
	ps := "live host/10/500\n" +
		"reused host/11/400\n" +
		"gone host/12/300\n" +
		"elsewhere other/12/300\n" +
		"nostart host/12/\n" +
		"unlabelled \n" +
		"garbage host/x/1\n" +
		"\n"
	got := orphanIDs(ps, "host", startOf)
	want := []string{"reused", "gone"}
	if !slices.Equal(got, want) {
		t.Fatalf("orphanIDs = %q, want %q", got, want)
	}
}

func TestDockerErrorCarriesStderr(t *testing.T) {
	err := error(&dockerError{
		args:   []string{"run", "--detach"},
		stderr: "docker: Error response from daemon: driver failed: Bind for 127.0.0.1:5000 failed: port is already allocated.\n",
		err:    errors.New("exit status 125"),
	})
	wrapped := errors.Join(errors.New("context"), err)
	if !dockerPortClash(wrapped) {
		t.Errorf("a wrapped port clash must be recognised: %v", wrapped)
	}
	if dockerSays(wrapped, "No such container") {
		t.Error("dockerSays matched text the command did not print")
	}
	if dockerPortClash(errors.New("port is already allocated")) {
		t.Error("only a docker command's stderr may count as a clash")
	}
}
