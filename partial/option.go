package partial

import "fmt"

// optionError is an option error worded for the user alone: it matches
// ErrBadOption without carrying its text.
type optionError struct{ msg string }

func (e *optionError) Error() string        { return e.msg }
func (e *optionError) Is(target error) bool { return target == ErrBadOption }

// BadOptionf is an error matching ErrBadOption whose message is the
// formatted text only (what is wrong, and what is accepted).
func BadOptionf(format string, a ...any) error {
	return &optionError{fmt.Sprintf(format, a...)}
}
