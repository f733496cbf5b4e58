package script

import "fmt"

// Call returns the script, KEYS and ARGV of the call a Client sends for
// args: an AcquireArgs, ReleaseArgs, CommitArgs, []ExtendArgs (with
// settings, the leases' to re-create), MetaArgs, PendingArgs, AdmitArgs,
// ClaimArgs, ClaimedArgs, ReconfigureArgs, or the Request of a call that
// takes no arguments struct. It is built by the same code as the Client's
// calls, for the contract cases (package contract), which send what a
// Client sends. It panics for any other type.
func Call(args any, settings string) (*Script, []string, []any) {
	var b Boxes
	var p *call
	switch a := args.(type) {
	case AcquireArgs:
		p = &b.Acquire(a).call
	case ReleaseArgs:
		p = &b.Release(a).call
	case CommitArgs:
		p = &NewCommit(a).call
	case []ExtendArgs:
		p = &NewExtend(a, settings).call
	case MetaArgs:
		p = &NewMeta(a).call
	case PendingArgs:
		keys, argv := a.call()
		return pendingScript, keys, argv
	case AdmitArgs:
		keys, argv := a.call()
		return admitScript, keys, argv
	case ClaimArgs:
		keys, argv := a.call()
		return bootstrapScript, keys, argv
	case ClaimedArgs:
		keys, argv := a.call()
		return bootstrapScript, keys, argv
	case ReconfigureArgs:
		keys, argv := a.call()
		return reconfigureScript, keys, argv
	case Request:
		argv := make([]any, len(a.Args))
		for i, v := range a.Args {
			argv[i] = v
		}
		return ByName(a.Script), a.Keys, argv
	default:
		panic(fmt.Sprintf("script: no call for %T", args))
	}
	keys, argv := p.split()
	return p.script, keys, argv
}

// Name is the script's name ("acquire", "release", ...).
func (s *Script) Name() string { return s.name }
