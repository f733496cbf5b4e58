package servers

import (
	"errors"

	"golang.org/x/sync/errgroup"
)

// StopAll stops every server at once and returns when all have stopped,
// with every error joined: a cleanup must name each server it could not
// stop, while errgroup's Wait keeps only the first. No entry may be nil.
func StopAll[S interface{ Stop() error }](list []S) error {
	errs := make([]error, len(list))
	var g errgroup.Group
	for i, s := range list {
		g.Go(func() error {
			errs[i] = s.Stop()
			return nil
		})
	}
	_ = g.Wait() // every error is in errs
	return errors.Join(errs...)
}
