package policyfile

import (
	"github.com/fsnotify/fsnotify"
)

// watch tells changed of every change in dir (fsnotify), until stop: the
// loader reads the file once the changes stop, and reloads it if its
// bytes changed, so that which of the directory's names an event is about
// (the file, an editor's temporary copy, a symlink swapped under it)
// does not matter.
func watch(dir string, changed chan<- struct{}) (stop func(), err error) {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, err
	}
	if err := w.Add(dir); err != nil {
		w.Close()
		return nil, err
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case _, ok := <-w.Events:
				if !ok {
					return
				}
			case _, ok := <-w.Errors:
				if !ok {
					return
				}
				// An overflow may have lost an event about the file: it is
				// read again all the same.
			}
			select {
			case changed <- struct{}{}:
			default: // one is pending already
			}
		}
	}()
	return func() {
		w.Close()
		<-done
	}, nil
}
