//go:build !linux

package httpapi

import "errors"

// notifier: none outside Linux; the watcher checks every file each second.
type notifier struct{}

func newNotifier() (*notifier, error) { return nil, errors.ErrUnsupported }

func (n *notifier) add(path string, dir bool) (int32, error) { return 0, errors.ErrUnsupported }

func (n *notifier) remove(wd int32) {}

func (n *notifier) run(changed, gone func(wd int32), lost func()) (failed bool) { return false }

func (n *notifier) close() {}

func localFS(path string) bool { return false }
